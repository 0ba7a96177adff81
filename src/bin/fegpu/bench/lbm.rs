//! `fegpu bench lbm`: D3Q19 steps per second (MLUPS) against the bandwidth
//! roofline, with the copy ceiling measured in the same run and the serial
//! CPU rate beside it.

use super::{describe, open_context, time};
use fegpu::context::Context;
use fegpu::error::Result;
use fegpu::lbm::{Lattice, Precision, Scheme, Q};
use fegpu::{FEGPU_PERIODIC_X, FEGPU_PERIODIC_Y, FEGPU_PERIODIC_Z};
use std::sync::Arc;
use std::time::Instant;

/// Bytes one site update moves: 19 populations read and written, and its flag,
/// whatever the scheme. (Neighbour flags are read too, but from cache: each
/// is shared by 19 sites.)
pub fn bytes_per_site(precision: Precision) -> usize {
    2 * Q * precision.bytes() + 1
}

/// The largest n^3 lattice the free device memory holds with the default
/// (in-place) scheme, found by creating it: the estimate from the bytes per
/// site, less 1% at a time until creation succeeds; with its MLUPS over a
/// few steps.
fn largest_lattice(ctx: &Arc<Context>, dtype: Precision) -> Result<(usize, f64)> {
    // (after the frees queued on the stream are done)
    let free = match ctx.gpu() {
        Some(g) => {
            g.synchronize("the last lattice's release")?;
            g.free_memory()
        }
        None => 0,
    };
    let per_site = Scheme::InPlace.bytes_per_site(dtype);
    // Lattices hold fewer than 2^31 sites.
    let mut n = ((free / per_site) as f64).cbrt().min((i32::MAX as f64).cbrt()) as usize;
    loop {
        match Lattice::new(ctx.clone(), [n as i64; 3], dtype, 0.6, ALL_PERIODIC) {
            Ok(lat) => {
                lat.init_equilibrium(1.0, [0.02, 0.01, 0.0])?;
                let t = time(ctx, 2, || lat.step(4))?;
                return Ok((n, (n * n * n) as f64 * 4.0 / t / 1e6));
            }
            Err(_) if n > 64 => n = n * 99 / 100,
            Err(e) => return Err(e),
        }
    }
}

const ALL_PERIODIC: i32 = FEGPU_PERIODIC_X | FEGPU_PERIODIC_Y | FEGPU_PERIODIC_Z;

/// Million lattice-site updates per second of `steps` steps on an n^3 periodic
/// box; `trt_magic` 0 for BGK; `forced` with a body force; the lattice's
/// default scheme and block size where None.
#[allow(clippy::too_many_arguments)]
fn mlups(
    ctx: &Arc<Context>,
    n: usize,
    dtype: Precision,
    trt_magic: f64,
    forced: bool,
    scheme: Option<Scheme>,
    block: Option<u32>,
    steps: u64,
    reps: usize,
) -> Result<f64> {
    let lat = Lattice::new(ctx.clone(), [n as i64; 3], dtype, 0.6, ALL_PERIODIC)?;
    if forced {
        lat.set_force([1e-6, 0.0, 0.0])?;
    }
    if let Some(block) = block {
        lat.set_block(block)?;
    }
    if let Some(scheme) = scheme {
        lat.set_scheme(scheme)?;
    }
    lat.set_trt(trt_magic)?;
    lat.init_equilibrium(1.0, [0.02, 0.01, 0.0])?;
    let t = time(ctx, reps, || lat.step(steps))?;
    Ok((n * n * n) as f64 * steps as f64 / t / 1e6)
}

/// Copy bandwidth (bytes read + written per second) of a 1 GiB device-to-device copy.
fn copy_bandwidth(ctx: &Context) -> Result<f64> {
    let Some(g) = ctx.gpu() else { return Ok(f64::NAN) };
    let n = 1usize << 28;
    let (a, mut b) = (g.alloc::<f32>(n)?, g.alloc::<f32>(n)?);
    let t = time(ctx, 20, || g.copy(&a, &mut b))?;
    Ok(2.0 * (n * 4) as f64 / t)
}

pub fn run() -> Result<()> {
    let ctx = open_context()?;
    println!("fegpu bench lbm on {}", describe(&ctx));
    let cpu = Arc::new(Context::cpu_reference());
    let serial = {
        let lat = Lattice::new(cpu.clone(), [48; 3], Precision::F64, 0.6, ALL_PERIODIC)?;
        let t = Instant::now();
        lat.step(3)?;
        (48usize.pow(3) * 3) as f64 / t.elapsed().as_secs_f64() / 1e6
    };
    let copy = copy_bandwidth(&ctx)?;
    println!("serial CPU reference (one core, f64, 48^3): {serial:.1} MLUPS");
    println!("device copy ceiling: {:.0} GB/s", copy / 1e9);
    println!("{:<8} {:<5} {:<7} {:>11} {:>10} {:>9} {:>10}", "size", "dtype", "", "MLUPS", "GB/s", "of copy", "vs serial");
    println!("(BGK or TRT; +F: with a body force, whose terms the step otherwise compiles out)");
    let trt = 3.0 / 16.0;
    // (size, storage, TRT magic (0: BGK), with a body force)
    let cases: &[(usize, Precision, f64, bool)] = if ctx.gpu().is_some() {
        &[
            (128, Precision::F32, 0.0, false),
            (256, Precision::F32, 0.0, false),
            (512, Precision::F32, 0.0, false),
            (128, Precision::F64, 0.0, false),
            (256, Precision::F64, 0.0, false),
            (256, Precision::F32, trt, false),
            (256, Precision::F64, trt, false),
            (128, Precision::F16, 0.0, false),
            (256, Precision::F16, 0.0, false),
            (512, Precision::F16, 0.0, false),
            (256, Precision::F16, trt, false),
            (256, Precision::F32, 0.0, true),
            (256, Precision::F16, 0.0, true),
        ]
    } else {
        &[
            (32, Precision::F32, 0.0, false),
            (48, Precision::F64, 0.0, false),
            (48, Precision::F64, trt, false),
            (32, Precision::F16, 0.0, false),
        ]
    };
    for &(n, dtype, magic, forced) in cases {
        let steps = if ctx.gpu().is_some() { 20 } else { 2 };
        let m = mlups(&ctx, n, dtype, magic, forced, None, None, steps, 5)?;
        let gbs = m * 1e6 * bytes_per_site(dtype) as f64;
        println!(
            "{:<8} {:<5} {:<7} {:>11.0} {:>10.0} {:>8.1}% {:>9.0}x",
            format!("{n}^3"),
            dtype.name(),
            format!("{}{}", if magic > 0.0 { "TRT" } else { "BGK" }, if forced { "+F" } else { "" }),
            m,
            gbs / 1e9,
            100.0 * gbs / copy,
            m / serial
        );
    }
    if ctx.gpu().is_some() {
        println!("device memory a site holds, and the largest cubic lattice (in place, BGK):");
        for dtype in [Precision::F16, Precision::F32, Precision::F64] {
            let (n, m) = largest_lattice(&ctx, dtype)?;
            println!(
                "  {}: {} bytes a site in place ({} with two buffers); largest {n}^3 ({:.2e} sites), {m:.0} MLUPS",
                dtype.name(),
                Scheme::InPlace.bytes_per_site(dtype),
                Scheme::Push.bytes_per_site(dtype),
                (n * n * n) as f64
            );
        }
        println!("streaming schemes and block sizes at 256^3 (BGK):");
        for dtype in [Precision::F16, Precision::F32, Precision::F64] {
            for scheme in [Scheme::InPlace, Scheme::Push, Scheme::Pull] {
                for block in [64, 128, 256] {
                    let m = mlups(&ctx, 256, dtype, 0.0, false, Some(scheme), Some(block), 20, 5)?;
                    let share = m * 1e6 * bytes_per_site(dtype) as f64 / copy;
                    println!("  {} {scheme:?} block {block:>3} {m:>8.0} MLUPS {:>6.1}% of copy", dtype.name(), 100.0 * share);
                }
            }
        }
    }
    Ok(())
}
