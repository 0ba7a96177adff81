//! `fegpu bench radfields`: GFLOP/s of the rad_fields convolution (flops
//! counted as `radfields::flops`, the seed's weights) for N_S 10k..200k and
//! n_RHS 1, 10, 100, with the FP64 FMA ceiling measured in the same run and the
//! serial loop's rate beside it; on a machine with several GPUs, N_S 200k
//! split across 1, 2, 4, .. of them (`--devices`: that part alone).

use super::{describe, open_context, time};
use fegpu::context::{Context, Request};
use fegpu::error::Result;
use fegpu::radfields::{cpu, cuda, flops, Accumulator, Kernel, Medium, Sources};
use num_complex::Complex64;
use std::sync::Arc;
use std::time::Instant;

/// Random S points on a shell outside the unit sphere and S' batches inside it.
struct Problem {
    s: Vec<f64>,
    p: Vec<f64>,
    w: Vec<f64>,
    cur: Vec<Complex64>,
}

fn problem(n_s: usize, n_p: usize, n_rhs: usize) -> Problem {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let s = (0..3 * n_s).map(|_| 2.0 + next()).collect();
    let p = (0..3 * n_p).map(|_| 0.5 * next()).collect();
    let w = (0..n_p).map(|_| 1.0 + 0.1 * next()).collect();
    let cur = (0..6 * n_p * n_rhs).map(|_| Complex64::new(next(), next())).collect();
    Problem { s, p, w, cur }
}

fn medium() -> Medium {
    Medium { k: Complex64::new(2.0 * std::f64::consts::PI, -0.05), omega_mu: Complex64::new(2.0 * std::f64::consts::PI, 0.0) }
}

/// The serial loop (one core, the CPU reference's pair functions): GFLOP/s.
fn serial_gflops(n_rhs: usize) -> f64 {
    let (n_s, n_p) = (400, 64);
    let pr = problem(n_s, n_p, n_rhs);
    let c = medium().consts();
    let mut f = vec![Complex64::default(); 6];
    let t = Instant::now();
    for s in 0..n_s {
        for p in 0..n_p {
            let Some(q) = cpu::pair_coefficients(
                [pr.s[3 * s], pr.s[3 * s + 1], pr.s[3 * s + 2]],
                [pr.p[3 * p], pr.p[3 * p + 1], pr.p[3 * p + 2]],
                pr.w[p],
                &c,
            ) else {
                continue;
            };
            for r in 0..n_rhs {
                cpu::add_pair(&q, &pr.cur[6 * (p + n_p * r)..][..6], &mut f);
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(&f);
    flops(n_s, n_p, n_rhs) / secs / 1e9
}

/// Seconds to accumulate the batches (each n_p points) of `pr` onto `acc`.
fn accumulate_all(acc: &Accumulator, pr: &Problem, n_p: usize, n_rhs: usize) -> Result<()> {
    let total = pr.w.len();
    let mut cur = Vec::with_capacity(6 * n_p * n_rhs);
    for first in (0..total).step_by(n_p) {
        cur.clear();
        for r in 0..n_rhs {
            cur.extend_from_slice(&pr.cur[6 * (first + total * r)..6 * (first + n_p + total * r)]);
        }
        acc.accumulate(&Sources::new(n_p, n_rhs, &pr.p[3 * first..3 * (first + n_p)], &pr.w[first..first + n_p], &cur)?)?;
    }
    Ok(())
}

pub fn run(args: &[String]) -> Result<()> {
    let devices_only = match args {
        [] => false,
        [a] if a == "--devices" => true,
        _ => return Err(fegpu::Error::invalid(format!("bench radfields: unknown options {args:?} (expected --devices)"))),
    };
    let ctx = open_context()?;
    println!("fegpu bench radfields on {}", describe(&ctx));
    let devices = if ctx.gpu().is_some() { fegpu::gpu::Gpu::device_count()? } else { 0 };
    if devices_only {
        return match devices {
            0 => Err(fegpu::Error::new(fegpu::error::ErrorKind::NoDevice, "bench radfields --devices: no CUDA device")),
            _ => several_devices(&ctx, devices),
        };
    }
    let Some(g) = ctx.gpu() else {
        println!("(no GPU: the serial rate only)");
        for n_rhs in [1, 10] {
            println!("serial loop, n_rhs {n_rhs}: {:.2} GFLOP/s", serial_gflops(n_rhs));
        }
        return Ok(());
    };
    let (peak_s, peak_flops) = cuda::fp64_peak(g)?;
    let peak = peak_flops / peak_s;
    println!("FP64 FMA ceiling (same run): {:.1} TFLOP/s", peak / 1e12);
    let serial: Vec<f64> = [1, 10, 100].iter().map(|&r| serial_gflops(r)).collect();
    println!("serial loop (one core): {:.2} / {:.2} / {:.2} GFLOP/s at n_rhs 1 / 10 / 100", serial[0], serial[1], serial[2]);
    println!(
        "flops per pair {} + {} per right-hand side (sqrt 4, exp/sin/cos 8, division 4)",
        fegpu::radfields::FLOPS_PER_PAIR,
        fegpu::radfields::FLOPS_PER_PAIR_RHS
    );
    println!(
        "{:>7} {:>5} {:>10} {:>7} {:>8} {:>10} {:>8} {:>10}",
        "N_S", "n_rhs", "calls x n_p", "kernel", "ms", "TFLOP/s", "of FP64", "vs serial"
    );
    for &n_s in &[10_000usize, 50_000, 200_000] {
        for (ri, &n_rhs) in [1usize, 10, 100].iter().enumerate() {
            // Batches: all of S' in calls of 256 points, then element by element (8 points per call).
            let total = batches(n_s, n_rhs);
            let pr = problem(n_s, total, n_rhs);
            for n_p in [256, 8] {
                for variant in [Kernel::Direct, Kernel::Tiled] {
                    let acc = Accumulator::new(vec![ctx.clone()], &pr.s, n_rhs, medium())?;
                    acc.set_variant(Some(variant));
                    let t = time(&ctx, 3, || accumulate_all(&acc, &pr, n_p, n_rhs))?;
                    let rate = flops(n_s, total, n_rhs) / t;
                    println!(
                        "{n_s:>7} {n_rhs:>5} {:>10} {:>7} {:>8.2} {:>10.2} {:>7.1}% {:>9.0}x",
                        format!("{}x{n_p}", total / n_p),
                        if variant == Kernel::Tiled { "tiled" } else { "direct" },
                        t * 1e3,
                        rate / 1e12,
                        100.0 * rate / peak,
                        rate / 1e9 / serial[ri]
                    );
                }
            }
        }
    }
    if devices >= 2 {
        several_devices(&ctx, devices)?;
    }
    Ok(())
}

/// S' batches of the size the table uses for N_S and n_rhs.
fn batches(n_s: usize, n_rhs: usize) -> usize {
    let per_pair = fegpu::radfields::FLOPS_PER_PAIR + fegpu::radfields::FLOPS_PER_PAIR_RHS * n_rhs as f64;
    ((4e11 / (n_s as f64 * per_pair)) as usize).clamp(256, 4096) / 256 * 256
}

/// N_S 200k for n_rhs 1, 10, 100 on one device and split across 2, 4, ..
/// `devices`, wall clock (queue everything, then wait on every device).
fn several_devices(ctx: &Arc<Context>, devices: usize) -> Result<()> {
    let mut contexts = vec![ctx.clone()];
    for d in 1..devices {
        contexts.push(Arc::new(Context::new(Request::Cuda, d as i64)?));
    }
    let counts: Vec<usize> = (0..).map(|k| 1 << k).take_while(|&n| n < devices).chain([devices]).collect();
    let n_s = 200_000;
    // the table's S' count for n_rhs, then 4096 points: a whole surface's
    // sources in one FE-IIEE iteration, in calls of 256
    let mut cases = Vec::new();
    for n_rhs in [1, 10, 100] {
        for case in [(n_rhs, batches(n_s, n_rhs)), (n_rhs, 4096)] {
            if !cases.contains(&case) {
                cases.push(case);
            }
        }
    }
    for (n_rhs, total) in cases {
        let pr = problem(n_s, total, n_rhs);
        let mut one = 0.0;
        for &n in &counts {
            let acc = Accumulator::new(contexts[..n].to_vec(), &pr.s, n_rhs, medium())?;
            let mut best = f64::INFINITY;
            for _ in 0..4 {
                let t = Instant::now();
                accumulate_all(&acc, &pr, 256, n_rhs)?;
                acc.synchronize()?;
                best = best.min(t.elapsed().as_secs_f64());
            }
            let rate = flops(n_s, total, n_rhs) / best;
            if n == 1 {
                one = rate;
            }
            println!(
                "{n} device(s), N_S {n_s}, n_rhs {n_rhs}, {total} S' points: {:.2} ms, {:.2} TFLOP/s (wall clock), speed-up {:.2}x",
                best * 1e3,
                rate / 1e12,
                rate / one
            );
        }
    }
    Ok(())
}
