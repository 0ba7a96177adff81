//! The `fegpu` command as a user runs it: `info`, the showcase's exit status,
//! and `fegpu solve`'s contract (exit 0 only when the recomputed true
//! residual meets the tolerance; b = 0 gives x = 0; --output writes x).

use std::path::PathBuf;
use std::process::Command;

fn fegpu(args: &[&str]) -> (bool, String) {
    fegpu_with(&[], args)
}

/// `fegpu args` with the environment variables `env` set.
fn fegpu_with(env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    // FEGPU_EXE: the staged binary on the GPU machine (scripts/gpu-round.sh)
    let exe = std::env::var("FEGPU_EXE").unwrap_or_else(|_| env!("CARGO_BIN_EXE_fegpu").to_string());
    let out = Command::new(exe).envs(env.iter().copied()).args(args).output().expect("run fegpu");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn matrix(name: &str) -> String {
    std::env::var_os("FEGPU_MATRICES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/matrices"))
        .join(format!("{name}.mtx"))
        .to_string_lossy()
        .into_owned()
}

fn read_vector(path: &std::path::Path) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('%'));
    let n: usize = lines.next().unwrap().split_whitespace().next().unwrap().parse().unwrap();
    let v: Vec<f64> = lines.map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(v.len(), n);
    v
}

#[test]
fn info_lists_the_backends() {
    let (ok, out) = fegpu(&["info"]);
    assert!(ok, "{out}");
    assert!(out.contains("backend cpu: available") && out.contains("AUTO selects"), "{out}");
}

#[test]
fn bench_radfields_refuses_an_unknown_option_and_devices_without_a_gpu() {
    let (ok, out) = fegpu(&["bench", "radfields", "--bogus"]);
    assert!(!ok && out.contains("unknown options") && out.contains("--devices"), "{out}");
    let (ok, out) = fegpu_with(&[("FEGPU_BACKEND", "cpu")], &["bench", "radfields", "--devices"]);
    assert!(!ok && out.contains("no CUDA device"), "{out}");
}

#[test]
fn bench_refuses_a_missing_matrix_by_name_before_any_row() {
    for what in ["spmv", "ilu", "solve"] {
        let (ok, out) = fegpu_with(&[("FEGPU_BACKEND", "cpu")], &["bench", what, "/nonexistent/A.mtx"]);
        assert!(!ok && out.contains("/nonexistent/A.mtx") && !out.contains("laplacian7"), "{what}: {out}");
    }
}

#[test]
fn solve_reports_and_writes_the_solution() {
    let dir = std::env::temp_dir().join(format!("fegpu-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = dir.join("x.mtx");
    let (ok, out) = fegpu(&[
        "solve",
        &matrix("sherman5"),
        "--method",
        "bicgstab",
        "--precond",
        "ilu0",
        "--tol",
        "1e-8",
        "--output",
        x.to_str().unwrap(),
    ]);
    assert!(ok, "{out}");
    for w in ["status: converged", "iterations:", "true relative residual", "error ||x - 1||", "times: upload"] {
        assert!(out.contains(w), "missing {w:?} in\n{out}");
    }
    let xs = read_vector(&x);
    assert_eq!(xs.len(), 3312);
    assert!(xs.iter().all(|v| (v - 1.0).abs() < 1e-4), "b = A*1, so x is all ones");

    // not converged within maxit: the exit status says so
    let (ok, out) = fegpu(&["solve", &matrix("orsirr_1"), "--precond", "none", "--maxit", "3"]);
    assert!(!ok && out.contains("FEGPU_ERR_NOT_CONVERGED"), "{out}");

    // CG on an SPD matrix; a zero right-hand side gives x = 0 at once
    let zero = dir.join("b0.mtx");
    std::fs::write(&zero, format!("%%MatrixMarket matrix array real general\n100 1\n{}", "0\n".repeat(100))).unwrap();
    let (ok, out) = fegpu(&[
        "solve",
        &matrix("nos4"),
        zero.to_str().unwrap(),
        "--method",
        "cg",
        "--precond",
        "jacobi",
        "--output",
        x.to_str().unwrap(),
    ]);
    assert!(ok && out.contains("iterations: 0"), "{out}");
    assert_eq!(read_vector(&x), vec![0.0; 100]);

    // Matrix Market files that would be read wrong or that declare far more rows than they hold
    let bad_files = [
        ("both_triangles", "symmetric", "2 2 3\n1 1 2\n2 1 1\n1 2 1\n", "both sides of the diagonal"),
        ("symmetric_rect", "symmetric", "3 2 1\n1 1 1\n", "must be square"),
        ("skew_diagonal", "skew-symmetric", "2 2 1\n1 1 1\n", "zero diagonal"),
        ("huge_declared", "general", "100000000 100000000 1\n1 1 1\n", "some rows are empty"),
        ("extra_entry", "general", "2 2 2\n1 1 1\n2 2 1\n1 2 1\n", "data after its 2 declared entries"),
        ("complex_values", "general", "1 1 1\n1 1 1 0\n", "expected 3 fields"),
        ("negative_size", "general", "-3 3 3\n1 1 1\n", "-3: a size or count cannot be negative"),
        ("four_sizes", "general", "3 3 3 4\n1 1 1\n", "expected 3 numbers, found 4"),
        // (A * 1 once read past a wide matrix's columns and panicked)
        ("wide", "general", "2 3 3\n1 1 1\n2 2 1\n1 3 1\n", "2 x 3: the solvers need a square matrix"),
    ];
    for (name, sym, body, want) in bad_files {
        let path = dir.join(format!("{name}.mtx"));
        std::fs::write(&path, format!("%%MatrixMarket matrix coordinate real {sym}\n{body}")).unwrap();
        let (ok, out) = fegpu(&["solve", path.to_str().unwrap()]);
        assert!(!ok && out.contains(want), "{name}: {out}");
    }
    // a right-hand side is array real general, one value a line, no more than declared
    for (name, text, want) in [
        ("b_complex", "array complex general\n2 1\n1 0\n1 0\n", "a vector is read as array real general"),
        ("b_two_a_line", "array real general\n2 1\n1 2\n3\n", "expected one value, found 2"),
        ("b_extra", "array real general\n1 1\n1\n2\n", "data after its 1 declared values"),
    ] {
        let path = dir.join(format!("{name}.mtx"));
        std::fs::write(&path, format!("%%MatrixMarket matrix {text}")).unwrap();
        let (ok, out) = fegpu(&["solve", &matrix("nos4"), path.to_str().unwrap()]);
        assert!(!ok && out.contains(want), "{name}: {out}");
    }

    // options: help, AMG's without AMG, counts out of range
    let (ok, out) = fegpu(&["solve", "--help"]);
    assert!(ok && out.contains("--precond"), "{out}");
    let (ok, out) = fegpu(&["solve", &matrix("nos4"), "--strength", "0.25"]);
    assert!(!ok && out.contains("give --precond amg"), "{out}");
    let (ok, out) = fegpu(&["solve", &matrix("nos4"), "--precond", "amg", "--coarsest", "0"]);
    assert!(!ok && out.contains("coarsest = 0"), "{out}");
    let (ok, out) = fegpu(&["solve", &matrix("nos4"), "--method", "gmres", "--restart", "10001"]);
    assert!(!ok && out.contains("--restart wants a count from 1 to 10000"), "{out}");
    let (ok, out) = fegpu(&["solve", &matrix("nos4"), "--precond", "amg", "--smoother", "gaussseidel:9"]);
    assert!(!ok && out.contains("smoother symmetric Gauss-Seidel x9"), "{out}");
    // a zero pivot is named and fails
    let (ok, out) = fegpu(&["solve", &matrix("west0479"), "--precond", "ilu0"]);
    assert!(!ok && out.contains("ILU(0)") && out.contains("row 0"), "{out}");
    let (ok, out) = fegpu(&["solve", "--method", "qmr", &matrix("nos4")]);
    assert!(!ok && out.contains("--method qmr"), "{out}");
    let (ok, out) = fegpu(&["solve", "--precond", "ilu0-jacobi:x", &matrix("nos4")]);
    assert!(!ok && out.contains("--precond ilu0-jacobi:x"), "{out}");
    let (ok, out) = fegpu(&["solve", "--restart", "5", &matrix("nos4")]);
    assert!(!ok && out.contains("--restart is GMRES's"), "{out}");
    let (ok, out) = fegpu(&["solve", &matrix("nos4"), "--tol", "1e-400"]);
    assert!(!ok && out.contains("--tol 1e-400: underflows to 0"), "{out}");
    let (ok, out) = fegpu(&["bench", "foo"]);
    assert!(!ok && out.contains("unknown benchmark \"foo\""), "{out}");
    let (ok, out) = fegpu(&["info", "extra"]);
    assert!(!ok && out.contains("info takes no arguments"), "{out}");

    // GMRES(20), BiCG and CGS with ILU(0) on sherman5: b = A*1, so x is all ones
    let sherman5 = matrix("sherman5");
    let cases = [
        &["--method", "gmres", "--restart", "20"][..],
        &["--method", "bicg"],
        &["--method", "cgs"],
        &["--precond", "ilu0-jacobi:3"],
        &["--precond", "ilu0-multicolour"],
        // three unknowns per cell: block ILU(0) over 3 x 3 blocks
        &["--block-size", "3"],
    ];
    for method in cases {
        let mut args = vec!["solve", &sherman5, "--precond", "ilu0", "--output", x.to_str().unwrap()];
        args.extend_from_slice(method);
        let (ok, out) = fegpu(&args);
        assert!(ok && out.contains("status: converged"), "{method:?}: {out}");
        assert!(read_vector(&x).iter().all(|v| (v - 1.0).abs() < 1e-4), "{method:?}");
    }
    // the method and preconditioner as the options name them, not as Rust prints its types
    let (ok, out) = fegpu(&["solve", &sherman5, "--method", "gmres", "--restart", "20", "--precond", "ilu0-jacobi:3"]);
    assert!(ok && out.contains("method GMRES(20), preconditioner ilu0-jacobi:3,"), "{out}");
    // multicolour ILU(0) says its colours (sherman5's graph takes 9 in row order); not for blocks
    let (ok, out) = fegpu(&["solve", &sherman5, "--precond", "ilu0-multicolour"]);
    assert!(ok && out.contains("ILU(0) in multicolour order: 9 colours"), "{out}");
    let (ok, out) = fegpu(&["solve", &sherman5, "--precond", "ilu0-multicolour", "--block-size", "3"]);
    assert!(!ok && out.contains("multicolour ILU(0)") && out.contains("block"), "{out}");
    // applied split: sherman5's graph has triangles (refused, naming rows); a 7-point grid's has none
    let (ok, out) = fegpu(&["solve", &sherman5, "--precond", "ilu0-multicolour-split"]);
    assert!(!ok && out.contains("coupled each to each") && out.contains("use ilu0-multicolour"), "{out}");
    let grid = dir.join("laplacian7.mtx");
    let (rp, ci, v) = fegpu::sparse::gallery::laplacian7(12);
    let (rp, ci): (Vec<i32>, Vec<i32>) = (rp.iter().map(|&k| k as i32).collect(), ci.iter().map(|&j| j as i32).collect());
    fegpu::sparse::mm::write_matrix(&grid, 1728, 1728, &rp, &ci, &v).unwrap();
    let grid = grid.to_str().unwrap();
    let (ok, out) = fegpu(&["solve", grid, "--precond", "ilu0-multicolour-split", "--output", x.to_str().unwrap()]);
    assert!(ok && out.contains("preconditioner ilu0-multicolour-split,") && out.contains("status: converged"), "{out}");
    assert!(read_vector(&x).iter().all(|v| (v - 1.0).abs() < 1e-4), "split: x is not all ones");
    // block Jacobi on sherman5's cells; a size that does not split is refused
    let (ok, out) = fegpu(&["solve", &sherman5, "--precond", "jacobi", "--block-size", "3"]);
    assert!(ok && out.contains("1104 block rows") && out.contains("status: converged"), "{out}");
    let (ok, out) = fegpu(&["solve", &sherman5, "--block-size", "5"]);
    assert!(!ok && out.contains("does not split into 5 x 5 blocks"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--precond amg` prints the hierarchy; `--f32-cycle` runs the cycle over
/// f32 values (the summary says so) to the same tolerance in about as many
/// iterations; `--cycle w` and `--cycle hybrid` take no more iterations, `--aggregation parallel` a
/// few more at most; a smoother, cycle or aggregation that does not exist is refused by name.
#[test]
fn solve_with_amg_prints_the_hierarchy_and_takes_the_f32_cycle() {
    let its = |out: &str| -> i64 {
        let line = out.lines().find(|l| l.trim_start().starts_with("iterations:")).expect("an iterations line");
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let run = |extra: &[&str]| {
        let path = matrix("gr_30_30");
        let mut args = vec!["solve", path.as_str(), "--method", "cg", "--precond", "amg", "--tol", "1e-10"];
        args.extend_from_slice(extra);
        fegpu(&args)
    };
    let (ok, double) = run(&[]);
    assert!(ok && double.contains("status: converged") && double.contains("levels"), "{double}");
    let (ok, single) = run(&["--f32-cycle"]);
    assert!(ok && single.contains("status: converged") && single.contains("cycle over f32 values"), "{single}");
    assert!((its(&single) - its(&double)).abs() <= 1, "f32 cycle:\n{single}\nf64 cycle:\n{double}");
    let (ok, out) = run(&["--smoother", "sor"]);
    assert!(!ok && out.contains("sor"), "{out}");
    // the W-cycle: said in the summary, converged in no more iterations than the V-cycle
    let (ok, w) = run(&["--cycle", "w"]);
    assert!(ok && w.contains("status: converged") && w.contains("W-cycle"), "{w}");
    assert!(its(&w) <= its(&double), "W-cycle:\n{w}\nV-cycle:\n{double}");
    // the hybrid cycle: the W-cycle's second visits where a level is cheap, the V-cycle's visit elsewhere
    let (ok, hybrid) = run(&["--cycle", "hybrid"]);
    assert!(ok && hybrid.contains("status: converged") && hybrid.contains("hybrid V/W-cycle"), "{hybrid}");
    assert!(its(&hybrid) <= its(&double), "hybrid cycle:\n{hybrid}\nV-cycle:\n{double}");
    let (ok, out) = run(&["--cycle", "f"]);
    assert!(!ok && out.contains("--cycle f"), "{out}");
    // the parallel aggregation: said in the summary, converged within a few iterations of the greedy one
    let (ok, parallel) = run(&["--aggregation", "parallel"]);
    assert!(ok && parallel.contains("status: converged") && parallel.contains("parallel aggregation"), "{parallel}");
    assert!(its(&parallel) <= its(&double) + 4, "parallel aggregation:\n{parallel}\ngreedy:\n{double}");
    let (ok, out) = run(&["--aggregation", "random"]);
    assert!(!ok && out.contains("--aggregation random"), "{out}");
}

/// `fegpu warm` compiles the kernel files named into the cache that
/// FEGPU_KERNEL_CACHE names (a second run finds them there), each kernel
/// alone for a file compiled one kernel at a time, or says that NVRTC is
/// missing (then the test passes only where FEGPU_REQUIRE_NVRTC is not 1),
/// and loads each on device 0 where that is an sm_90 GPU;
/// an architecture that is not sm_XY and an unknown file are refused.
#[test]
fn warm_fills_the_kernel_cache() {
    let dir = std::env::temp_dir().join(format!("fegpu-warm-{}", std::process::id()));
    let cache = dir.to_str().unwrap();
    let (ok, out) = fegpu_with(&[("FEGPU_KERNEL_CACHE", cache)], &["warm", "--arch", "sm_90", "vector", "radfields", "dense"]);
    let required = std::env::var("FEGPU_REQUIRE_NVRTC").map(|v| v == "1").unwrap_or(false);
    if !ok && out.contains("NVRTC") && !required {
        eprintln!("NVRTC absent: fegpu warm not checked ({out})");
    } else {
        assert!(ok && out.contains("kernels/vector.cu: compiled") && out.contains("kernels/radfields.cu: compiled"), "{out}");
        // on an sm_90 GPU every file is loaded there too (the driver's cache); elsewhere only compiled
        let on_gpu = fegpu::gpu::Gpu::open(0).is_ok_and(|g| g.arch() == "sm_90");
        assert_eq!(out.contains("each file loaded on device 0"), on_gpu, "{out}");
        assert!(fegpu::ONE_KERNEL_AT_A_TIME.contains(&"dense") && !fegpu::ONE_KERNEL_AT_A_TIME.contains(&"vector"));
        // dense.cu kernel by kernel: as many entries as kernels, and the compile of empty bodies that named them
        let kernels: usize = out
            .split("kernels/dense.cu: ")
            .nth(1)
            .and_then(|rest| rest.split_once(" kernels one at a time, "))
            .and_then(|(n, rest)| rest.starts_with(&format!("{n} compiled, 0 already cached")).then(|| n.parse().ok())?)
            .unwrap_or_else(|| panic!("dense.cu not compiled kernel by kernel:\n{out}"));
        assert!(kernels > 30, "{out}");
        let entries =
            std::fs::read_dir(&dir).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "ptx"));
        assert_eq!(entries.count(), 2 + kernels + 1, "{out}");
        let (ok, again) = fegpu_with(&[("FEGPU_KERNEL_CACHE", cache)], &["warm", "--arch", "sm_90", "vector", "dense"]);
        assert!(ok && again.contains("kernels/vector.cu: already cached"), "{again}");
        assert!(
            again.contains(&format!("kernels/dense.cu: {kernels} kernels one at a time, 0 compiled, {kernels} already cached")),
            "{again}"
        );
    }
    let (ok, out) = fegpu(&["warm", "--arch", "90"]);
    assert!(!ok && out.contains("--arch 90: expected sm_"), "{out}");
    let (ok, out) = fegpu(&["warm", "--arch", "sm_90", "spmv"]);
    assert!(!ok && out.contains("unknown kernel file \"spmv\"") && out.contains("sparse"), "{out}");
    let (ok, out) = fegpu_with(&[("FEGPU_KERNEL_CACHE", "off")], &["warm", "--arch", "sm_90"]);
    assert!(!ok && out.contains("the kernel cache is off"), "{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `fegpu solve` on a 7-point operator deep enough for the ILU(0) windows
/// (16 x 16 x 40, x fastest; past 8,192 rows, where the box is walked): it
/// converges, and on the device it says how
/// the plane pipeline split the planes (2 runs of 20, a window before
/// each); elsewhere there are no windows to report.
#[test]
fn solve_reports_the_ilu_windows_on_the_device() {
    let dir = std::env::temp_dir().join(format!("fegpu-cli-windows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("box.mtx");
    let (nx, ny, nz) = (16usize, 16usize, 40usize);
    let mut entries = Vec::new();
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let row = i + nx * (j + ny * k);
                for (di, dj, dk, w) in [
                    (0, 0, -1, -1.0),
                    (0, -1, 0, -1.0),
                    (-1, 0, 0, -1.0),
                    (0, 0, 0, 6.0),
                    (1, 0, 0, -1.0),
                    (0, 1, 0, -1.0),
                    (0, 0, 1, -1.0),
                ] {
                    let (a, b, c) = (i as i64 + di, j as i64 + dj, k as i64 + dk);
                    if (0..nx as i64).contains(&a) && (0..ny as i64).contains(&b) && (0..nz as i64).contains(&c) {
                        let col = a as usize + nx * (b as usize + ny * c as usize);
                        entries.push(format!("{} {} {w}", row + 1, col + 1));
                    }
                }
            }
        }
    }
    let n = nx * ny * nz;
    let header = format!("%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n", entries.len());
    std::fs::write(&a, header + &entries.join("\n") + "\n").unwrap();
    let (ok, out) = fegpu(&["solve", a.to_str().unwrap(), "--precond", "ilu0", "--tol", "1e-8"]);
    assert!(ok && out.contains("status: converged"), "{out}");
    let windows = "ILU(0) sweeps: the plane pipeline; lower: 2 runs of 20 planes, each from a window of";
    assert_eq!(out.contains(windows), out.contains(" on cuda"), "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}
