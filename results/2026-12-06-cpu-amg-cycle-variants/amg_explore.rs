// Iteration counts of AMG-CG on bench amg's varied-layers porous system
// (gallery::layered_varied_permeability(n, 1e6, 8, 1.25, 7), z = 0 fixed,
// b = A x0 as bench amg makes it), on the CPU reference backend.
// Copy into examples/ and run:
//   cargo build --release --example amg_explore
//   N=96 ONLY=default,cheb3,cheb4 FEGPU_BACKEND=cpu target/release/examples/amg_explore
// With w_cycle.patch applied to src/amg/cpu.rs, XW=1 visits every coarse
// level twice (a W-cycle), XW=2 only below level 1; XW=99 is the V-cycle.
use fegpu::amg::{Options, Smoother};
use fegpu::array::Array;
use fegpu::context::{Context, Request};
use fegpu::sparse::solver::{Method, Precond, Settings, Solver};
use fegpu::sparse::{self, gallery, Csr};
use std::sync::Arc;

fn main() {
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(48);
    let ctx = Arc::new(Context::new(Request::Auto, 0).unwrap());
    let k = gallery::layered_varied_permeability(n, 1e6, 8, 1.25, 7);
    let mut z0 = [false; 6];
    z0[4] = true;
    let (rp, ci, v) = gallery::porous_flow_fixed(n, &k, &z0);
    let nn = n * n * n;
    let a = Arc::new(Csr::new(ctx.clone(), sparse::build_pattern(nn, nn, &rp, &ci, 0).unwrap(), &v).unwrap());
    let x0: Vec<f64> = (0..nn).map(|i| 1.0 + ((i * 7919) % 1000) as f64 / 1000.0).collect();
    let mut bh = vec![0.0; nn];
    sparse::cpu::spmv(&a.pattern, &v, 1.0, &x0, 0.0, &mut bh);
    let variants: Vec<(&str, Options)> = vec![
        ("default", Options::default()),
        ("cheb3", Options { smoother: Some(Smoother::Chebyshev { degree: 3 }), ..Options::default() }),
        ("cheb4", Options { smoother: Some(Smoother::Chebyshev { degree: 4 }), ..Options::default() }),
        ("gs1", Options { smoother: Some(Smoother::GaussSeidel { sweeps: 1 }), ..Options::default() }),
        ("theta0.08", Options { strength: 0.08, ..Options::default() }),
        ("theta0.25", Options { strength: 0.25, ..Options::default() }),
        ("l1j2", Options { smoother: Some(Smoother::L1Jacobi { sweeps: 2 }), ..Options::default() }),
    ];
    let only = std::env::var("ONLY").ok();
    for (name, o) in variants {
        if let Some(w) = &only {
            if !w.split(',').any(|x| x == name) {
                continue;
            }
        }
        let b = Array::new(ctx.clone(), nn, 1, Some(&bh)).unwrap();
        let x = Array::new(ctx.clone(), nn, 1, Some(&vec![0.0; nn])).unwrap();
        let settings = Settings { amg: o, ..Settings::from_env() };
        let s = Solver::with_settings(a.clone(), Method::Cg, Precond::Amg, settings).unwrap();
        let t = std::time::Instant::now();
        let (out, rel, _) = s.solve(&b, &x, 1e-8, 500).unwrap();
        println!("{name}: its {} conv {} rel {rel:.1e} solve {:.2}s", out.iterations, out.converged, t.elapsed().as_secs_f64());
        println!("{}", s.amg_summary().unwrap());
    }
}
