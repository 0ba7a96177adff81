use fegpu::amg::{Cycle, Options};
use fegpu::array::Array;
use fegpu::context::{Context, Request};
use fegpu::sparse::gallery::{self, CsrArrays};
use fegpu::sparse::solver::{Method, Precond, Settings, Solver};
use fegpu::sparse::{build_pattern, Csr};
use std::sync::Arc;

fn csr(ctx: &Arc<Context>, (rp, ci, v): &CsrArrays) -> Arc<Csr> {
    let n = rp.len() - 1;
    Arc::new(Csr::new(ctx.clone(), build_pattern(n, n, rp, ci, 0).unwrap(), v).unwrap())
}

#[test]
fn probe() {
    let ctx = Arc::new(Context::new(Request::Auto, 0).unwrap());
    let mut z0 = [false; 6];
    z0[4] = true;
    let systems: Vec<(String, CsrArrays)> = vec![
        ("laplacian 32".into(), gallery::laplacian7(32)),
        ("laplacian 64".into(), gallery::laplacian7(64)),
        ("lognormal 48".into(), gallery::porous_flow(48, &gallery::lognormal_permeability(48, 1e6, 1))),
        ("varied 32".into(), gallery::porous_flow_fixed(32, &gallery::layered_varied_permeability(32, 1e6, 8, 1.25, 7), &z0)),
        ("varied 48".into(), gallery::porous_flow_fixed(48, &gallery::layered_varied_permeability(48, 1e6, 8, 1.25, 7), &z0)),
        ("varied 64".into(), gallery::porous_flow_fixed(64, &gallery::layered_varied_permeability(64, 1e6, 8, 1.25, 7), &z0)),
    ];
    for (name, arrays) in systems {
        let a = csr(&ctx, &arrays);
        let n = arrays.0.len() - 1;
        let mut b = vec![0.0; n];
        fegpu::sparse::cpu::spmv(&a.pattern, &a.download_values().unwrap(), 1.0, &vec![1.0; n], 0.0, &mut b);
        for mis in [false, true] {
            if mis { std::env::set_var("FEGPU_MIS2", "1") } else { std::env::remove_var("FEGPU_MIS2") }
            for cycle in [Cycle::V, Cycle::Hybrid] {
                let s = Solver::with_settings(a.clone(), Method::Cg, Precond::Amg, Settings { amg: Options { cycle, ..Options::default() }, ..Settings::from_env() }).unwrap();
                let (ba, xa) = (Array::new(ctx.clone(), n, 1, Some(&b)).unwrap(), Array::new(ctx.clone(), n, 1, Some(&vec![0.0; n])).unwrap());
                let (out, _, _) = s.solve(&ba, &xa, 1e-8, 5000).unwrap();
                let summary = s.amg_summary().unwrap();
                let levels: Vec<String> = summary.lines().filter(|l| l.trim_start().starts_with("level ")).map(|l| l.split_whitespace().nth(2).unwrap().to_string()).collect();
                let oc = summary.lines().next().unwrap().split("complexity ").nth(1).unwrap().split(',').next().unwrap().to_string();
                eprintln!("{name:14} {:7} {:?}: its {:3}  rows/level {:?} complexity {oc}", if mis { "MIS(2)" } else { "greedy" }, cycle, out.iterations, levels);
            }
        }
    }
}
