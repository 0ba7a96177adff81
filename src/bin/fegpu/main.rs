//! The `fegpu` command: `info`, `warm`, `solve`, `bench ...`, and the showcase (no arguments).

// Numerical loops that index several arrays at once read closer to their formulas.
#![allow(clippy::needless_range_loop)]

mod bench;

use fegpu::gpu::Gpu;
use std::process::ExitCode;

const USAGE: &str = "usage:
  fegpu                      showcase: a legacy transpose loop on the best backend present
  fegpu info                 backends, devices, compute capability, NVRTC version
  fegpu warm [--arch sm_XY] [FILE...]
                             compiles kernels/*.cu (or the FILEs named, e.g. sparse krylov)
                             with NVRTC into the kernel cache (FEGPU_KERNEL_CACHE; by default
                             ~/.cache/fegpu/kernels) for device 0's architecture, or sm_XY
                             without a GPU: a job's first solve then loads them (NVRTC takes
                             seconds a file on a fresh machine); on a GPU of that
                             architecture each file is loaded too, so the driver caches
                             its machine code (~/.nv/ComputeCache)
  fegpu solve A.mtx [b.mtx] [--method bicgstab|cg|gmres|bicg|cgs] [--restart M]
              [--precond none|jacobi|ilu0|ilu0-jacobi[:SWEEPS]|ilu0-multicolour[-split]|amg]
              [--tol T] [--maxit N]
              [--output x.mtx]
              [--strength THETA] [--smoother chebyshev:DEGREE|l1jacobi:SWEEPS|gaussseidel:SWEEPS]
              [--coarsest ROWS] [--block-size K] [--unsmoothed] [--f32-cycle] [--cycle v|w|hybrid]
              [--aggregation greedy|parallel]
                             solve A x = b (b = A*1 when omitted: the exact x is all ones);
                             GMRES restarts every M iterations (default 30); ilu0-jacobi:
                             ILU(0)'s factors, each triangular solve by SWEEPS Jacobi sweeps (2);
                             ilu0-multicolour: ILU(0) of the rows reordered by colour, a pass
                             a colour per triangular solve (more iterations than ilu0);
                             ilu0-multicolour-split: the same applied split (Eisenstat's
                             trick: no product with A an iteration), for graphs without
                             triangles (7-point grids) and bicgstab, cgs or gmres;
                             --block-size K: K unknowns per node, the matrix read as K x K
                             blocks (block CSR: jacobi and ilu0 become block Jacobi and block
                             ILU(0)), for amg aggregated node by node; the AMG options tune
                             --precond amg; exit status 0 only when
                             ||b - Ax||/||b|| <= tol. Under mpiexec (MPI builds) rank 0 reads
                             the system, the rows are split over the ranks and solved there
                             (jacobi of the whole matrix, ilu0 and amg per rank's block)
  fegpu bench transpose [--size MxN]... [--reps R]
                             transpose and copy kernels: time, GB/s, fraction of the
                             device-to-device copy measured in the same run, speedup
                             over the serial loop; pinned vs pageable uploads
  fegpu bench spmv [A.mtx]   SpMV on 7-point 128^3, 27-point 96^3 (and A): GB/s, fraction of copy
  fegpu bench solve [A.mtx]  CG / BiCGSTAB per iteration against the bytes-moved roofline
  fegpu bench ilu [A.mtx]    ILU(0) on the device: sync-free vs level-by-level vs Jacobi-swept triangles: apply, factor, solve
  fegpu bench block          block CSR (2, 3, 4 unknowns a cell): SpMV vs the copy ceiling and CSR, block Jacobi / ILU(0)
  fegpu bench amg            AMG against Jacobi-CG and ILU(0)-BiCGSTAB: iterations, setup, re-setup, time to solution
  mpiexec -n N fegpu bench dist [--only solve,lattice,ebe] [--system laplacian|elasticity] [--grid n] [--weak]
      [--method M] [--precond P] [--iterations k] [--tol t] [--lattice m] [--lattice-weak] [--steps s] [--ebe e]
                             (MPI builds) a distributed Krylov solve (7-point n^3 Laplacian or hex8 elasticity),
                             a D3Q19 step split in z-slabs and an EBE CG iteration, each against one process
  fegpu bench fem            element integration throughput; EBE vs assembled CG per iteration (hex8, ~1M dofs)
  fegpu bench lbm            D3Q19 MLUPS (128^3..512^3 f32, 128^3/256^3 f64) against the copy roofline
  fegpu bench radfields [--devices]
                             rad_fields GFLOP/s (N_S 10k..200k, n_RHS 1/10/100) against the FP64 ceiling;
                             --devices: N_S 200k on 1, 2, 4, .. of the machine's GPUs alone
  fegpu bench pipeline       host-array pipelines: versions 1/2/3 at 1..16 streams, measured vs the overlap model
environment: FEGPU_BACKEND=auto|cpu|cuda, FEGPU_DEVICE=N";

fn info() -> fegpu::Result<()> {
    println!("fegpu {}", env!("CARGO_PKG_VERSION"));
    println!("backend cpu: available (reference)");
    match Gpu::device_count() {
        Err(e) => println!("backend cuda: not available ({})", e.message),
        Ok(count) => {
            println!("backend cuda: {count} device(s)");
            for d in 0..count {
                let g = Gpu::open(d)?;
                let i = &g.info;
                println!(
                    "  device {d}: {}, {:.1} GiB, compute capability {}.{}, {} SMs, driver {}.{}, NVRTC {}.{}",
                    i.name,
                    i.total_memory as f64 / (1u64 << 30) as f64,
                    i.compute_capability.0,
                    i.compute_capability.1,
                    i.multiprocessors,
                    i.driver_version / 1000,
                    (i.driver_version % 1000) / 10,
                    i.nvrtc_version.0,
                    i.nvrtc_version.1
                );
            }
        }
    }
    let ctx = bench::open_context()?;
    println!("AUTO selects: {}", bench::describe(&ctx));
    Ok(())
}

/// `fegpu warm`: the kernel files compiled into the on-disk cache, so that
/// a job's first calls load them instead of compiling (a cluster's login
/// node can warm a shared cache for its GPU nodes' architecture).
fn warm(args: &[String]) -> fegpu::Result<()> {
    let bad = |m: String| fegpu::Error::invalid(format!("warm: {m}"));
    let (mut arch, mut files) = (None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--arch" => match it.next() {
                Some(v) if v.strip_prefix("sm_").is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) => {
                    arch = Some(v.clone())
                }
                other => {
                    return Err(bad(format!(
                        "--arch {}: expected sm_ and the compute capability, e.g. sm_90",
                        other.map_or("", |v| v)
                    )))
                }
            },
            f if fegpu::KERNEL_SOURCES.iter().any(|(m, _)| *m == f) => files.push(f.to_string()),
            other => {
                let known: Vec<&str> = fegpu::KERNEL_SOURCES.iter().map(|(m, _)| *m).collect();
                return Err(bad(format!("unknown kernel file {other:?} (the files: {})", known.join(", "))));
            }
        }
    }
    // device 0 where it is of the architecture: each file is loaded on it as well
    let (arch, gpu) = match arch {
        Some(a) => {
            let g = Gpu::open(0).ok().filter(|g| g.arch() == a);
            (a, g)
        }
        None => {
            let g = Gpu::open(0)
                .map_err(|e| bad(format!("no GPU to take the architecture from ({}): give --arch sm_XY", e.message)))?;
            (g.arch().to_string(), Some(g))
        }
    };
    let Some(dir) = fegpu::gpu::kernel_cache::directory() else {
        return Err(bad("the kernel cache is off (FEGPU_KERNEL_CACHE=off, or no HOME): nothing to warm".into()));
    };
    // a cache that cannot be written is a miss to the library; here it is the whole point
    let probe = dir.join(format!(".warm-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&probe, b""))
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| bad(format!("the kernel cache {} cannot be written: {e}", dir.display())))?;
    match &gpu {
        Some(_) => println!("kernel cache {} for {arch}, each file loaded on device 0 (the driver's cache)", dir.display()),
        None => println!("kernel cache {} for {arch}", dir.display()),
    }
    for (module, source) in fegpu::KERNEL_SOURCES.iter().filter(|(m, _)| files.is_empty() || files.iter().any(|f| f == m)) {
        let clock = std::time::Instant::now();
        let compile = |text: &str| fegpu::gpu::compile_cached(module, text, &arch, Some(&dir), true);
        // from the cache just filled: the driver's translation is what loading adds
        let load = |text: &str| gpu.as_ref().map_or(Ok(()), |g| g.load_module(module, text).map(drop));
        let what = if fegpu::ONE_KERNEL_AT_A_TIME.contains(module) {
            // as jobs ask for them: each kernel alone, the names from a compile of empty bodies
            let names = compile(&fegpu::gpu::one_kernel_source(source, ""))?.0.to_src();
            let names = fegpu::gpu::entry_names(&names);
            use rayon::prelude::*;
            let compiled = names
                .par_iter()
                .map(|k| {
                    let text = fegpu::gpu::one_kernel_source(source, k);
                    compile(&text).map(|(_, hit)| (text, hit))
                })
                .collect::<fegpu::Result<Vec<_>>>()?;
            let hits = compiled.iter().filter(|(_, hit)| *hit).count();
            for (text, _) in &compiled {
                load(text)?;
            }
            format!("{} kernels one at a time, {} compiled, {hits} already cached", names.len(), names.len() - hits)
        } else {
            let (_, cached) = compile(source)?;
            load(source)?;
            (if cached { "already cached" } else { "compiled" }).to_string()
        };
        println!("  kernels/{module}.cu: {what} ({:.2} s)", clock.elapsed().as_secs_f64());
    }
    Ok(())
}

/// MxN, both at least 1.
fn parse_size(s: &str) -> Option<(usize, usize)> {
    let (m, n) = s.split_once(['x', 'X'])?;
    let (m, n): (usize, usize) = (m.parse().ok()?, n.parse().ok()?);
    (m > 0 && n > 0).then_some((m, n))
}

fn bench(args: &[String]) -> fegpu::Result<()> {
    let bad = |m: String| fegpu::Error::invalid(format!("{m}\n{USAGE}"));
    match args.first().map(String::as_str) {
        Some("transpose") => {
            let (mut sizes, mut reps) = (Vec::new(), 20);
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--size" => sizes.push(
                        it.next().and_then(|s| parse_size(s)).ok_or_else(|| bad("--size wants MxN, both at least 1".into()))?,
                    ),
                    "--reps" => {
                        reps = it.next().and_then(|s| s.parse().ok()).ok_or_else(|| bad("--reps wants a count".into()))?
                    }
                    other => return Err(bad(format!("unknown option {other}"))),
                }
            }
            if sizes.is_empty() {
                sizes = vec![(1024, 1024), (4096, 4096), (8192, 8192)];
            }
            bench::transpose(&sizes, reps.max(1))
        }
        Some(which @ ("spmv" | "solve" | "ilu")) => {
            let real = args.get(1).map(std::path::PathBuf::from);
            match which {
                "spmv" => bench::sparse::spmv(real.as_deref()),
                "solve" => bench::sparse::solve(real.as_deref()),
                _ => bench::sparse::ilu(real.as_deref()),
            }
        }
        Some("block") => bench::sparse::block(),
        Some("lbm") => bench::lbm::run(),
        Some("fem") => bench::fem::run(),
        Some("amg") => bench::amg::run_all(),
        #[cfg(feature = "mpi")]
        Some("dist") => bench::dist::run(&args[1..]),
        Some("radfields") => bench::radfields::run(&args[1..]),
        Some("pipeline") => bench::pipeline::run(),
        Some(other) => Err(bad(format!("unknown benchmark \"{other}\""))),
        None => Err(bad("bench wants one of transpose, spmv, solve, ilu, block, lbm, fem, amg, radfields, pipeline".into())),
    }
}

fn solve(args: &[String]) -> fegpu::Result<bool> {
    use fegpu::sparse::solver::{Method, Precond};
    let bad = |m: String| fegpu::Error::invalid(format!("{m}\n{USAGE}"));
    let mut files = Vec::new();
    let mut o = bench::solve::Options {
        matrix: Default::default(),
        rhs: None,
        method: Method::Bicgstab,
        precond: Precond::Ilu0,
        tol: 1e-8,
        maxit: 10000,
        output: None,
        amg: Default::default(),
        block: 1,
    };
    let (mut restart, mut amg_options) = (None, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| bad(format!("{a} wants a value")));
        match a.as_str() {
            "--method" => {
                o.method = bench::method_named(&value()?, restart.unwrap_or(Method::DEFAULT_RESTART)).map_err(bad)?;
            }
            "--restart" => {
                let m = value()?.parse().ok().filter(|m: &usize| (1..=Method::MAX_RESTART).contains(m));
                restart = Some(m.ok_or_else(|| bad(format!("--restart wants a count from 1 to {}", Method::MAX_RESTART)))?);
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(true);
            }
            "--precond" => {
                o.precond = bench::precond_named(&value()?).map_err(bad)?;
            }
            "--strength" => {
                amg_options = true;
                o.amg.strength = value()?.parse().map_err(|_| bad("--strength wants a number".into()))?;
            }
            "--coarsest" => {
                amg_options = true;
                o.amg.coarsest = value()?.parse().map_err(|_| bad("--coarsest wants a count".into()))?;
            }
            "--block-size" => o.block = value()?.parse().map_err(|_| bad("--block-size wants a count".into()))?,
            "--unsmoothed" => (amg_options, o.amg.smooth_prolongator) = (true, false),
            "--f32-cycle" => (amg_options, o.amg.f32_cycle) = (true, true),
            "--cycle" => {
                amg_options = true;
                o.amg.cycle = match value()?.as_str() {
                    "v" | "V" => fegpu::amg::Cycle::V,
                    "w" | "W" => fegpu::amg::Cycle::W,
                    "hybrid" => fegpu::amg::Cycle::Hybrid,
                    c => return Err(bad(format!("--cycle {c}: expected v, w or hybrid"))),
                };
            }
            "--aggregation" => {
                amg_options = true;
                o.amg.aggregation = match value()?.as_str() {
                    "greedy" => fegpu::amg::Aggregation::Greedy,
                    "parallel" => fegpu::amg::Aggregation::Parallel,
                    a => return Err(bad(format!("--aggregation {a}: expected greedy or parallel"))),
                };
            }
            "--smoother" => {
                amg_options = true;
                use fegpu::amg::Smoother;
                let v = value()?;
                let (kind, steps) = match v.split_once(':') {
                    Some((kind, steps)) => {
                        (kind, steps.parse().map_err(|_| bad(format!("--smoother {v}: the steps after ':' must be a count")))?)
                    }
                    None => (v.as_str(), Smoother::default_steps(v == "gaussseidel")),
                };
                o.amg.smoother = Some(match kind {
                    "chebyshev" => Smoother::Chebyshev { degree: steps },
                    "l1jacobi" => Smoother::L1Jacobi { sweeps: steps },
                    "gaussseidel" => Smoother::GaussSeidel { sweeps: steps },
                    _ => {
                        return Err(bad(format!(
                            "--smoother {v}: expected chebyshev:DEGREE, l1jacobi:SWEEPS or gaussseidel:SWEEPS"
                        )))
                    }
                });
            }
            "--tol" => {
                let v = value()?;
                o.tol = v.parse().map_err(|_| bad("--tol wants a number".into()))?;
                if o.tol == 0.0 && v.trim_start_matches(['+', '-', '0', '.']).starts_with(|c: char| c.is_ascii_digit()) {
                    return Err(bad(format!("--tol {v}: underflows to 0 in double precision; give a tolerance above 1e-300")));
                }
            }
            "--maxit" => o.maxit = value()?.parse().map_err(|_| bad("--maxit wants a count".into()))?,
            "--output" => o.output = Some(value()?.into()),
            f if !f.starts_with("--") => files.push(f.to_string()),
            f => return Err(bad(format!("unknown option {f}"))),
        }
    }
    match (o.method, restart) {
        (Method::Gmres { .. }, Some(m)) => o.method = Method::Gmres { restart: m },
        (_, Some(_)) => return Err(bad("--restart is GMRES's: give --method gmres".into())),
        _ => {}
    }
    if amg_options && o.precond != Precond::Amg {
        return Err(bad(
            "--strength, --coarsest, --smoother, --unsmoothed, --f32-cycle, --cycle and --aggregation are AMG's: give --precond amg".into(),
        ));
    }
    match files.as_slice() {
        [a] => o.matrix = a.into(),
        [a, b] => {
            o.matrix = a.into();
            o.rhs = Some(b.into());
        }
        _ => return Err(bad("solve wants A.mtx and optionally b.mtx".into())),
    }
    if bench::solve::under_mpi_launcher() {
        #[cfg(feature = "mpi")]
        return bench::solve::run_distributed(&o);
        #[cfg(not(feature = "mpi"))]
        eprintln!("fegpu: this fegpu was built without MPI (cargo feature mpi): every rank solves the whole system alone");
    }
    bench::solve::run(&o)
}

fn main() -> ExitCode {
    // The driver gives all streams 8 hardware queues unless told otherwise;
    // pipelines on more streams then queue one lane's kernel behind another
    // lane's copy. Set before any CUDA call and before any thread starts.
    if std::env::var_os(fegpu::gpu::CONNECTIONS_VAR).is_none() {
        std::env::set_var(fegpu::gpu::CONNECTIONS_VAR, fegpu::pipeline::MAX_STREAMS.to_string());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("showcase") => bench::showcase(),
        Some("info") if args.len() == 1 => info(),
        Some("info") => Err(fegpu::Error::invalid(format!("info takes no arguments (got {})", args[1..].join(" ")))),
        Some("warm") => warm(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("solve") => match solve(&args[1..]) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(fegpu::Error::invalid(format!("unknown command {other:?}\n{USAGE}"))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fegpu: {}", e.message);
            ExitCode::FAILURE
        }
    }
}
