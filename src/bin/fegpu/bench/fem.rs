//! `fegpu bench fem`: element-matrix integration throughput per element type
//! and problem (elements per second, the bytes of the packed matrices
//! written against the copy ceiling, the serial CPU loop beside it), and CG
//! per iteration on 3-D hex8 elasticity of about 1M dofs, element by element
//! (stored K^e) against the assembled CSR matrix, with their memory.

use super::sparse::start;
use super::time;
use fegpu::array::Array;
use fegpu::context::Context;
use fegpu::error::Result;
use fegpu::fem::ebe::EbeSolver;
use fegpu::fem::{cpu, Element, ElementSet, Level, Problem};
use fegpu::sparse::solver::{Method, Precond, Solver};
use std::sync::Arc;
use std::time::Instant;

/// `count` separate elements of type `t`, each its reference shape shifted
/// and distorted a little (nodes not shared: integration reads every node).
fn loose_elements(t: Element, count: usize) -> (Vec<f64>, Vec<i64>) {
    let reference = cpu::reference_nodes(t);
    let dim = t.dim();
    let (mut coords, mut conn) = (Vec::with_capacity(count * reference.len() * dim), Vec::with_capacity(count * reference.len()));
    for e in 0..count {
        for (a, x) in reference.iter().enumerate() {
            for c in 0..dim {
                let wobble = 0.1 * (((e * 7 + a * 13 + c * 29) % 17) as f64 / 17.0 - 0.5);
                coords.push(x[c] + wobble + (e % 1000) as f64);
            }
            conn.push((e * reference.len() + a) as i64);
        }
    }
    (coords, conn)
}

pub(super) fn set_of(
    ctx: &Arc<Context>,
    t: Element,
    problem: Problem,
    coords: &[f64],
    conn: &[i64],
    order: i32,
) -> Result<ElementSet> {
    let (nodes, elements) = (coords.len() / t.dim(), conn.len() / t.nodes());
    ElementSet::new(
        ctx.clone(),
        t,
        problem,
        nodes as i64,
        coords,
        elements as i64,
        conn,
        0,
        &[30e3, 0.2],
        &vec![0; elements],
        order,
    )
}

pub fn run() -> Result<()> {
    let (ctx, ceiling) = start("fem")?;
    let on_gpu = ctx.gpu().is_some();
    let cpu_ctx = Arc::new(Context::cpu_reference());
    println!("\nintegration of every K^e, order 2 for quad4/hex8: level I (a thread per element), II (an element per block), IIa (several per block):");
    println!("  bytes = the packed K^e written (8 nd (nd + 1) / 2 per element)");
    println!(
        "  {:<7} {:<8} {:<5} {:>9} {:>10} {:>13} {:>9} {:>8} {:>13} {:>10}",
        "element", "problem", "level", "elements", "ms", "elements/s", "GB/s", "of copy", "serial el/s", "vs serial"
    );
    let cases = [
        (Element::Tri3, Problem::Heat),
        (Element::Quad4, Problem::Heat),
        (Element::Tet4, Problem::Heat),
        (Element::Hex8, Problem::Heat),
        (Element::Tri3, Problem::PlaneStrain),
        (Element::Quad4, Problem::PlaneStrain),
        (Element::Tet4, Problem::Elastic3d),
        (Element::Hex8, Problem::Elastic3d),
    ];
    for (t, problem) in cases {
        let nd = t.nodes() * problem.dofs_per_node(t.dim());
        let packed_bytes = 8 * nd * (nd + 1) / 2;
        let count = if on_gpu { ((1usize << 30) / packed_bytes).min(1 << 21) } else { 20_000 };
        let (coords, conn) = loose_elements(t, count);
        let set = set_of(&ctx, t, problem, &coords, &conn, 2)?;
        // the serial loop: the CPU reference, one element after another
        let serial_count = count.min(20_000);
        let (sc, sn) = loose_elements(t, serial_count);
        let serial_set = set_of(&cpu_ctx, t, problem, &sc, &sn, 2)?;
        let props = serial_set.materials()?.props.clone();
        let mut ke = vec![0.0; serial_set.packed_len() * serial_count];
        let clock = Instant::now();
        cpu::stiffness(&serial_set, &props, &mut ke).expect("valid elements");
        let serial_rate = serial_count as f64 / clock.elapsed().as_secs_f64();
        for (level, name) in [(Level::Element, "I"), (Level::Point, "II"), (Level::Blocked, "IIa")] {
            set.set_integration(Some(level));
            let seconds = time(&ctx, 5, || set.integrate())?;
            let rate = count as f64 / seconds;
            let gbs = (count * packed_bytes) as f64 / seconds / 1e9;
            println!(
                "  {:<7} {:<8} {name:<5} {count:>9} {:>10.3} {rate:>13.3e} {gbs:>9.1} {:>7.1}% {serial_rate:>13.3e} {:>9.0}x",
                t.name(),
                format!("{problem:?}").chars().take(8).collect::<String>(),
                seconds * 1e3,
                100.0 * gbs / ceiling,
                rate / serial_rate
            );
        }
    }

    quadratic_integration(&ctx, &cpu_ctx)?;

    let n = if on_gpu { 68 } else { 12 };
    let (coords, conn) = fegpu::fem::gallery::hex_block(n);
    let set = Arc::new(set_of(&ctx, Element::Hex8, Problem::Elastic3d, &coords, &conn, 2)?);
    let dofs = set.dofs();
    println!("\nCG per iteration, hex8 elasticity on {n}^3 elements: {dofs} dofs, Jacobi, the x = 0 face clamped");
    set.integrate()?;
    // the pattern and gather map where the set lives, against the host's build (the reference)
    set_of(&ctx, Element::Hex8, Problem::Elastic3d, &coords, &conn, 2)?.assembly_pattern()?; // kernels compiled
    let clock = Instant::now();
    set.assembly_pattern()?;
    let map_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let csr = set.assemble()?;
    ctx.gpu().map(|g| g.synchronize("assembly")).transpose()?;
    let gather_s = clock.elapsed().as_secs_f64();
    let host_set = set_of(&cpu_ctx, Element::Hex8, Problem::Elastic3d, &coords, &conn, 2)?;
    let clock = Instant::now();
    host_set.assembly_pattern()?;
    let host_map_s = clock.elapsed().as_secs_f64();
    drop(host_set);
    let fixed: Vec<i64> =
        (0..set.nodes).filter(|&v| coords[3 * v] == 0.0).flat_map(|v| (0..3).map(move |c| (3 * v + c) as i64)).collect();
    let zeros = vec![0.0; fixed.len()];
    let load: Vec<f64> = (0..dofs).map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5).collect();
    let iters = if on_gpu { 100 } else { 10 };
    let b = Array::new(ctx.clone(), dofs, 1, Some(&load))?;
    let x = Array::new(ctx.clone(), dofs, 1, Some(&vec![0.0; dofs]))?;
    let per_iteration = |solve: &dyn Fn(&Array, &Array) -> Result<i64>| -> Result<f64> {
        solve(&b, &x)?; // warm-up: kernels compiled, the iteration captured
        x.upload(0, &vec![0.0; dofs], "x")?;
        let clock = Instant::now();
        let its = solve(&b, &x)?;
        Ok(clock.elapsed().as_secs_f64() / its.max(1) as f64)
    };
    // element by element first: it leaves b as it is
    let ebe = EbeSolver::new(set.clone(), &fixed, 0, &zeros, false)?;
    let ebe_s = per_iteration(&|b, x| Ok(ebe.solve(b, x, 1e-30, iters)?.0.iterations))?;
    let otf = EbeSolver::new(set.clone(), &fixed, 0, &zeros, true)?;
    let otf_s = per_iteration(&|b, x| Ok(otf.solve(b, x, 1e-30, iters)?.0.iterations))?;
    fegpu::sparse::apply_dirichlet(&csr, &fixed, 0, &zeros, &b)?;
    let assembled = Solver::new(csr.clone(), Method::Cg, Precond::Jacobi)?;
    let csr_s = per_iteration(&|b, x| Ok(assembled.solve(b, x, 1e-30, iters)?.0.iterations))?;
    let nnz = csr.pattern.nnz();
    let csr_bytes = 12 * nnz + 4 * (dofs + 1);
    let ebe_bytes = set.packed_len() * set.elements * 8 + set.conn.len() * 4 + dofs;
    let otf_bytes = set.coords.len() * 8 + set.conn.len() * 4 + set.material.len() * 4 + dofs;
    let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
    println!("  {:<34} {:>10} {:>12} {:>10}", "operator", "ms/iter", "memory MiB", "vs CSR");
    println!("  {:<34} {:>10.4} {:>12.1} {:>9.2}x", format!("assembled CSR ({nnz} entries)"), csr_s * 1e3, mib(csr_bytes), 1.0);
    println!("  {:<34} {:>10.4} {:>12.1} {:>9.2}x", "element by element, stored K^e", ebe_s * 1e3, mib(ebe_bytes), ebe_s / csr_s);
    println!(
        "  {:<34} {:>10.4} {:>12.1} {:>9.2}x",
        "element by element, K^e on the fly",
        otf_s * 1e3,
        mib(otf_bytes),
        otf_s / csr_s
    );
    println!(
        "\nassembly of the {dofs}-dof matrix ({nnz} entries, {} element contributions):",
        set.elements * set.element_dofs().pow(2)
    );
    println!("  pattern and gather map, {}: {:.1} ms", ctx.backend_name(), map_s * 1e3);
    println!("  pattern and gather map, the host build (CPU backend): {:.1} ms ({:.1}x)", host_map_s * 1e3, host_map_s / map_s);
    println!("  values gathered from the element matrices: {:.2} ms", gather_s * 1e3);

    // the heat stepper: made once, then changed in place
    let heat_set = Arc::new(set_of(&ctx, Element::Hex8, Problem::Heat, &coords, &conn, 2)?);
    heat_set.integrate()?;
    heat_set.assemble()?;
    let bottom: Vec<i64> = (0..heat_set.nodes).filter(|&v| coords[3 * v + 2] == 0.0).map(|v| v as i64).collect();
    let top: Vec<i64> = (0..heat_set.nodes).filter(|&v| coords[3 * v + 2] == n as f64).map(|v| v as i64).collect();
    let sync = || ctx.gpu().map(|g| g.synchronize("heat")).transpose();
    let clock = Instant::now();
    let heat = fegpu::fem::heat::HeatStepper::new(heat_set.clone(), 0.1, 1.0, &bottom, 0, &vec![1.0; bottom.len()])?;
    sync()?;
    let made_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    heat.set_convection(&top, 0, &vec![0.5; top.len()], &vec![-1.0; top.len()])?;
    sync()?;
    let convection_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    heat.set_dt(0.05)?;
    sync()?;
    let dt_s = clock.elapsed().as_secs_f64();
    let temps = Array::new(ctx.clone(), heat_set.dofs(), 1, Some(&vec![0.0; heat_set.dofs()]))?;
    let clock = Instant::now();
    let (outcome, _) = heat.step(&temps, None, 1e-8, 1000)?;
    let step_s = clock.elapsed().as_secs_f64();
    println!("\nheat stepper, hex8 on {n}^3 elements ({} dofs, backward Euler):", heat_set.dofs());
    println!("  made (K and C gathered, the step's matrix, the solver): {:.1} ms", made_s * 1e3);
    println!("  set_convection ({} nodes), recomputed in place: {:.1} ms", top.len(), convection_s * 1e3);
    println!("  set_dt, recomputed in place: {:.1} ms", dt_s * 1e3);
    println!("  one step ({} CG iterations): {:.1} ms", outcome.iterations, step_s * 1e3);
    drop((heat, heat_set));
    nonlinear_explicit(&ctx, &cpu_ctx, &set, &coords, &conn)?;
    drop(set);
    thermal_stress(&ctx, &cpu_ctx)
}

/// A thermal-stress step (age, two creep terms, autogenous strain) on a
/// dam-like block of n^3 hex8 (1M elements on the GPU): a rock base and
/// concrete lifts cast a day apart, the base held; the step without CG
/// iterations (element passes, moduli, the matrix gathered, Dirichlet rows)
/// against the serial code (the CPU reference) per element, and whole steps.
fn thermal_stress(ctx: &Arc<Context>, cpu_ctx: &Arc<Context>) -> Result<()> {
    use fegpu::fem::stress::ThermalStress;
    let law = |rock: bool| -> Vec<f64> {
        if rock {
            vec![2.0, 40e3, 0.0, 0.0, 0.8e-5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        } else {
            vec![0.0, 30e3, 0.4, 0.34, 1e-5, -50e-6, 0.4, 0.5, 5e-6, 1e-5, 0.45, 0.3, 3e-6, 5e-6, 0.45, 0.005]
        }
    };
    let laws = [law(true), law(false)].concat();
    let make = |c: &Arc<Context>, n: usize| -> Result<(ThermalStress, Array, usize)> {
        let (coords, conn) = fegpu::fem::gallery::hex_block(n);
        let ne = conn.len() / 8;
        let layer = |e: usize| e / (n * n); // z layer
        let material: Vec<i64> = (0..ne).map(|e| if layer(e) < n / 5 { 0 } else { 1 }).collect();
        let cast: Vec<f64> =
            (0..ne).map(|e| if layer(e) < n / 5 { -100.0 } else { -1.0 - (n - layer(e)) as f64 / n as f64 * 10.0 }).collect();
        let set = Arc::new(ElementSet::new(
            c.clone(),
            Element::Hex8,
            Problem::Elastic3d,
            (coords.len() / 3) as i64,
            &coords,
            ne as i64,
            &conn,
            0,
            &[40e3, 0.25, 30e3, 0.167],
            &material,
            2,
        )?);
        let nodes = set.nodes;
        let base: Vec<i64> =
            (0..nodes).filter(|&v| coords[3 * v + 2] == 0.0).flat_map(|v| (0..3).map(move |c| (3 * v + c) as i64)).collect();
        let start = vec![15.0; nodes];
        let stress = ThermalStress::new(set, &laws, 2, &cast, 0.0, &start, &base, 0)?;
        let warm: Vec<f64> =
            (0..nodes).map(|v| 15.0 + 10.0 * (coords[3 * v + 2] / n as f64) * (1.0 - coords[3 * v] / n as f64)).collect();
        Ok((stress, Array::new(c.clone(), nodes, 1, Some(&warm))?, ne))
    };
    let n = if ctx.gpu().is_some() { 100 } else { 12 };
    let sync = || ctx.gpu().map(|g| g.synchronize("stress")).transpose();
    let clock = Instant::now();
    let (stress, warm, ne) = make(ctx, n)?;
    sync()?;
    let made_s = clock.elapsed().as_secs_f64();
    stress.step(0.5, &warm, None, 1.0, 10)?; // kernels compiled
    sync()?;
    let clock = Instant::now();
    stress.step(0.5, &warm, None, 1.0, 10)?;
    sync()?;
    let passes_s = clock.elapsed().as_secs_f64();
    let clock = Instant::now();
    let outcome = stress.step(0.5, &warm, None, 1e-6, 20000)?;
    sync()?;
    let step_s = clock.elapsed().as_secs_f64();
    let serial_n = 20;
    let (serial, serial_warm, serial_ne) = make(cpu_ctx, serial_n)?;
    serial.step(0.5, &serial_warm, None, 1.0, 10)?;
    let clock = Instant::now();
    serial.step(0.5, &serial_warm, None, 1.0, 10)?;
    let serial_s = clock.elapsed().as_secs_f64();
    let per = |s: f64, count: usize| s / count as f64 * 1e9;
    println!(
        "
thermal stress with age and creep (2 terms), hex8 dam-like block {n}^3: {ne} elements, {} dofs:",
        3 * (n + 1).pow(3)
    );
    println!("  made (unit-modulus K^e, the pattern and map, state): {:.1} ms", made_s * 1e3);
    println!(
        "  a step without CG iterations (element passes, moduli, gather, Dirichlet rows): {:.2} ms = {:.1} ns per element",
        passes_s * 1e3,
        per(passes_s, ne)
    );
    println!(
        "  the same, serial (CPU reference, {serial_ne} elements): {:.1} ms = {:.0} ns per element ({:.0}x)",
        serial_s * 1e3,
        per(serial_s, serial_ne),
        per(serial_s, serial_ne) / per(passes_s, ne)
    );
    println!("  a whole step, CG with Jacobi to 1e-6: {:.1} ms ({} iterations)", step_s * 1e3, outcome.iterations);
    Ok(())
}

/// Quadratic elements' K^e (order 3; tet10 and hex20 elasticity by the
/// blocked kernel) in elements per second and in model flops (at each
/// point: the Jacobian, its inverse and the gradients, 4 NN DIM^2; row p's
/// B^T D, 2 NS^2 for each of ND rows; the packed entries, 2 NS each)
/// against the FP64 FMA rate measured in the same run, and the serial loop.
fn quadratic_integration(ctx: &Arc<Context>, cpu_ctx: &Arc<Context>) -> Result<()> {
    let peak = match ctx.gpu() {
        Some(g) => {
            let (s, flops) = fegpu::radfields::cuda::fp64_peak(g)?;
            flops / s
        }
        None => f64::NAN,
    };
    println!("\nquadratic elements, every K^e at order 3 (FP64 FMA ceiling in the same run: {:.1} TFLOP/s):", peak / 1e12);
    println!(
        "  {:<6} {:<8} {:>9} {:>10} {:>13} {:>10} {:>8} {:>13} {:>10}",
        "element", "problem", "elements", "ms", "elements/s", "GFLOP/s", "of FP64", "serial el/s", "vs serial"
    );
    for t in [Element::Tri6, Element::Quad8, Element::Tet10, Element::Hex20] {
        for problem in [Problem::Heat, if t.dim() == 2 { Problem::PlaneStrain } else { Problem::Elastic3d }] {
            let dim = t.dim();
            let (nn, dpn) = (t.nodes(), problem.dofs_per_node(dim));
            let (nd, ns) = (nn * dpn, problem.stress_components(dim));
            let np = nd * (nd + 1) / 2;
            let points = cpu::points(t, 3).len();
            let flops = (points * (4 * nn * dim * dim + nd * 2 * ns * ns + np * 2 * ns)) as f64;
            let count = if ctx.gpu().is_some() { ((1usize << 30) / (8 * np)).min(1 << 20) } else { 2_000 };
            let (coords, conn) = loose_elements(t, count);
            let set = set_of(ctx, t, problem, &coords, &conn, 3)?;
            let seconds = time(ctx, 5, || set.integrate())?;
            let serial_count = count.min(2_000);
            let (sc, sn) = loose_elements(t, serial_count);
            let serial_set = set_of(cpu_ctx, t, problem, &sc, &sn, 3)?;
            let props = serial_set.materials()?.props.clone();
            let mut ke = vec![0.0; np * serial_count];
            let clock = Instant::now();
            cpu::stiffness(&serial_set, &props, &mut ke).expect("valid elements");
            let serial_rate = serial_count as f64 / clock.elapsed().as_secs_f64();
            let rate = count as f64 / seconds;
            let gflops = rate * flops / 1e9;
            println!(
                "  {:<7} {:<8} {count:>9} {:>10.3} {rate:>13.3e} {gflops:>10.0} {:>7.1}% {serial_rate:>13.3e} {:>9.0}x",
                t.name(),
                format!("{problem:?}").chars().take(8).collect::<String>(),
                seconds * 1e3,
                100.0 * gflops * 1e9 / peak,
                rate / serial_rate
            );
        }
    }
    Ok(())
}

/// The total Lagrangian explicit step (FEStudio's Algorithm 1) on the CG
/// bench's hex8 mesh: its internal forces in elements per second against
/// the serial loop (the CPU reference, one thread) and the linear step's
/// SpMV, and whole steps of both schemes.
fn nonlinear_explicit(
    ctx: &Arc<Context>,
    cpu_ctx: &Arc<Context>,
    set: &Arc<ElementSet>,
    coords: &[f64],
    conn: &[i64],
) -> Result<()> {
    use fegpu::fem::dynamics::{DynamicsStepper, Scheme};
    // flops per hex8 element, 8 Gauss points: J and its inverse (~350), F (144), E and S (~80), P (54), forces (144)
    const FLOPS: f64 = 8.0 * 770.0;
    let (dofs, ne) = (set.dofs(), set.elements);
    set.set_density(&[2.4e-9])?;
    set.integrate()?;
    let csr = set.assemble()?;
    let sync = || ctx.gpu().map(|g| g.synchronize("tl")).transpose();
    let u0: Vec<f64> = (0..dofs).map(|i| 1e-3 * (((i * 7919) % 1000) as f64 / 1000.0 - 0.5)).collect();
    let u = Array::new(ctx.clone(), dofs, 1, Some(&u0))?;
    let f = Array::new(ctx.clone(), dofs, 1, Some(&vec![0.0; dofs]))?;
    let reps = if ctx.gpu().is_some() { 50 } else { 2 };
    let timed = |run: &dyn Fn() -> Result<()>| -> Result<f64> {
        run()?;
        sync()?;
        let clock = Instant::now();
        for _ in 0..reps {
            run()?;
        }
        sync()?;
        Ok(clock.elapsed().as_secs_f64() / reps as f64)
    };
    let force_s = timed(&|| set.internal_force(-1.0, &u, &f))?;
    let spmv_s = timed(&|| fegpu::sparse::spmv(&csr, -1.0, &u, 1.0, &f))?;
    let host = set_of(cpu_ctx, Element::Hex8, Problem::Elastic3d, coords, conn, 2)?;
    let (hu, hf) =
        (Array::new(cpu_ctx.clone(), dofs, 1, Some(&u0))?, Array::new(cpu_ctx.clone(), dofs, 1, Some(&vec![0.0; dofs]))?);
    host.internal_force(-1.0, &hu, &hf)?; // the geometry checked
    let clock = Instant::now();
    host.internal_force(-1.0, &hu, &hf)?;
    let serial_s = clock.elapsed().as_secs_f64();
    let clamped: Vec<i64> =
        (0..set.nodes).filter(|&v| coords[3 * v] == 0.0).flat_map(|v| (0..3).map(move |c| (3 * v + c) as i64)).collect();
    let step_of = |scheme: Scheme| -> Result<f64> {
        let stepper = DynamicsStepper::new(set.clone(), 1e-7, scheme, &clamped, 0)?;
        u.upload(0, &u0, "u")?;
        timed(&|| stepper.step(&u, None, 0.0, 0))
    };
    let (tl_step_s, linear_step_s) = (step_of(Scheme::TotalLagrangian)?, step_of(Scheme::CentralDifference)?);
    let rate = |s: f64| ne as f64 / s / 1e6;
    println!(
        "
nonlinear explicit dynamics (total Lagrangian, St Venant-Kirchhoff), hex8 on {ne} elements ({dofs} dofs):"
    );
    println!("  {:<44} {:>9} {:>16} {:>9}", "", "ms", "Melements/s", "GFLOP/s");
    println!(
        "  {:<44} {:>9.3} {:>16.1} {:>9.0}",
        "internal forces, element by element",
        force_s * 1e3,
        rate(force_s),
        ne as f64 * FLOPS / force_s / 1e9
    );
    println!(
        "  {:<44} {:>9.1} {:>16.2} {:>9.1}",
        "the same, serial loop (CPU reference, 1 thread)",
        serial_s * 1e3,
        rate(serial_s),
        ne as f64 * FLOPS / serial_s / 1e9
    );
    println!(
        "  {:<44} {:>9.3} {:>16.1} {:>9}",
        format!("linear K u by SpMV ({} entries)", csr.pattern.nnz()),
        spmv_s * 1e3,
        rate(spmv_s),
        ""
    );
    println!("  {:<44} {:>9.3}", "one step, total Lagrangian", tl_step_s * 1e3);
    println!("  {:<44} {:>9.3}", "one step, linear central differences", linear_step_s * 1e3);
    println!("  forces: {:.0}x the serial loop, {:.2}x the SpMV's time", serial_s / force_s, force_s / spmv_s);
    Ok(())
}
