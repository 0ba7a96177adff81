//! `fegpu bench ...` and the showcase: timings on the context's backend with
//! the ceiling measured in the same run. Device times come from stream events
//! (median of repeated runs after a warm-up); host times from the wall clock.

pub mod amg;
#[cfg(feature = "mpi")]
pub mod dist;
pub mod fem;
pub mod lbm;
pub mod pipeline;
pub mod radfields;
pub mod solve;
pub mod sparse;

use fegpu::array::{Array, Real};
use fegpu::context::{Backend, Context};
use fegpu::dense::{self, cpu, cuda::Shape, cuda::SHAPES, Variant};
use fegpu::error::Result;
use fegpu::sparse::solver::{Method, Precond};
use std::sync::Arc;
use std::time::Instant;

pub fn open_context() -> Result<Arc<Context>> {
    Ok(Arc::new(Context::new(fegpu::context::Request::Auto, 0)?))
}

pub fn describe(ctx: &Context) -> String {
    match &ctx.backend {
        Backend::Cpu => "cpu (reference backend)".into(),
        Backend::Cuda(g) => {
            let i = &g.info;
            format!(
                "cuda: device {} {} (sm_{}{}, {} SMs, {:.1} GiB)",
                i.ordinal,
                i.name,
                i.compute_capability.0,
                i.compute_capability.1,
                i.multiprocessors,
                i.total_memory as f64 / (1u64 << 30) as f64
            )
        }
    }
}

/// The middle value (the upper one of an even count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median seconds of `reps` runs of `f` after one warm-up run.
pub fn time(ctx: &Context, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        match ctx.gpu() {
            Some(g) => {
                let start = g.mark()?;
                f()?;
                samples.push(start.seconds_until(&g.mark()?)?);
            }
            None => {
                let t = Instant::now();
                f()?;
                samples.push(t.elapsed().as_secs_f64());
            }
        }
    }
    Ok(median(samples))
}

fn random<T: Real>(n: usize, seed: u64, from: impl Fn(f64) -> T) -> Vec<T> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            from((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

struct Row {
    what: String,
    seconds: f64,
    bytes: f64,
}

fn print_rows(title: &str, rows: &[Row], ceiling_gbs: f64, serial_s: f64) {
    println!("\n{title}");
    println!("  {:<28} {:>10} {:>10} {:>9} {:>12}", "kernel", "time ms", "GB/s", "of copy", "vs serial");
    for r in rows {
        let gbs = r.bytes / r.seconds / 1e9;
        println!(
            "  {:<28} {:>10.4} {:>10.1} {:>8.1}% {:>11.1}x",
            r.what,
            r.seconds * 1e3,
            gbs,
            100.0 * gbs / ceiling_gbs,
            serial_s / r.seconds
        );
    }
}

fn bench_transpose_typed<T: Real>(ctx: &Arc<Context>, m: usize, n: usize, reps: usize, from: impl Fn(f64) -> T) -> Result<()> {
    let host = random::<T>(m * n, (m * 31 + n) as u64, from);
    let a = Array::new(ctx.clone(), m, n, Some(&host))?;
    let at = Array::new::<T>(ctx.clone(), n, m, None)?;
    let b = Array::new::<T>(ctx.clone(), m, n, None)?;
    let bytes = 2.0 * (m * n * std::mem::size_of::<T>()) as f64;

    let mut serial_out = vec![host[0]; m * n];
    let t = Instant::now();
    cpu::transpose_serial(m, n, &host, &mut serial_out);
    let serial_s = t.elapsed().as_secs_f64();

    let ceiling = time(ctx, reps, || dense::copy(&a, &b, None))?;
    let mut rows = vec![Row { what: "copy (driver d2d: ceiling)".into(), seconds: ceiling, bytes }];
    if ctx.gpu().is_some() {
        for v in [Variant::Naive, Variant::Tile] {
            rows.push(Row {
                what: format!("copy {}", v.name()),
                seconds: time(ctx, reps, || dense::copy(&a, &b, Some(v)))?,
                bytes,
            });
        }
        rows.push(Row {
            what: "transpose naive".into(),
            seconds: time(ctx, reps, || dense::transpose(&a, &at, Some(Variant::Naive)))?,
            bytes,
        });
        for v in [Variant::Tile, Variant::Padded] {
            for s in SHAPES {
                let shape: Shape = s;
                let secs = time(ctx, reps, || dense::transpose_shaped(&a, &at, Some(v), Some(shape)))?;
                rows.push(Row {
                    what: format!("transpose {} {}x{}/{}", v.name(), s.tile, s.tile * s.jt, s.rows),
                    seconds: secs,
                    bytes,
                });
            }
        }
        if m == n {
            for v in Variant::ALL {
                let secs = time(ctx, reps, || dense::transpose_in_place(&b, Some(v)))?;
                rows.push(Row { what: format!("in place {}", v.name()), seconds: secs, bytes });
            }
        }
    }
    let secs = time(ctx, reps, || dense::transpose(&a, &at, None))?;
    rows.push(Row { what: "transpose AUTO (default)".into(), seconds: secs, bytes });
    // the benchmark's own result must be right
    let mut got = vec![host[0]; m * n];
    at.download(0, &mut got, "at")?;
    assert!(got == serial_out, "benchmark transpose differs from the serial loop");

    print_rows(
        &format!("transpose {m} x {n} {} (bytes = read + write; serial loop {:.1} ms)", T::DTYPE.name(), serial_s * 1e3),
        &rows,
        bytes / ceiling / 1e9,
        serial_s,
    );
    Ok(())
}

/// Uploads of one host array before and after page-locking it.
fn bench_uploads(ctx: &Arc<Context>, reps: usize) -> Result<()> {
    let n = 32 << 20; // 256 MiB of f64
    let mut host = random::<f64>(n, 7, |x| x);
    let dev = Array::new::<f64>(ctx.clone(), n, 1, None)?;
    let gb = (n * 8) as f64 / 1e9;
    let pageable = time(ctx, reps, || dev.upload(0, &host, "host"))?;
    ctx.register_host(host.as_mut_ptr() as *mut u8, n * 8)?;
    let pinned = time(ctx, reps, || dev.upload(0, &host, "host"));
    ctx.unregister_host(host.as_mut_ptr() as *mut u8)?;
    let pinned = pinned?;
    println!("\nhost-to-device upload of a 256 MiB f64 array");
    println!("  pageable              {:>8.2} ms {:>8.1} GB/s", pageable * 1e3, gb / pageable);
    println!("  registered (pinned)   {:>8.2} ms {:>8.1} GB/s   {:.1}x pageable", pinned * 1e3, gb / pinned, pageable / pinned);
    Ok(())
}

pub fn transpose(sizes: &[(usize, usize)], reps: usize) -> Result<()> {
    let ctx = open_context()?;
    println!("fegpu bench transpose on {}", describe(&ctx));
    for &(m, n) in sizes {
        bench_transpose_typed::<f64>(&ctx, m, n, reps, |x| x)?;
        bench_transpose_typed::<f32>(&ctx, m, n, reps, |x| x as f32)?;
    }
    bench_uploads(&ctx, reps.min(10))
}

/// `x` to `digits` significant figures (1.41, 14.1, 1410): a speedup of
/// 1.41 printed as "1x" says nothing.
pub fn significant(x: f64, digits: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (digits - 1 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// The README's first command: a legacy loop's transpose, moved to the best backend present.
pub fn showcase() -> Result<()> {
    let ctx = open_context()?;
    println!("fegpu showcase on {}", describe(&ctx));
    let (m, n, steps) = (4096, 4096, 20);
    let a = random::<f64>(m * n, 42, |x| x);
    let mut serial = vec![0.0; m * n];
    let t = Instant::now();
    cpu::transpose_serial(m, n, &a, &mut serial);
    let serial_s = t.elapsed().as_secs_f64();
    println!("serial do-loop transpose of a {m} x {n} f64 matrix: {:.1} ms", serial_s * 1e3);

    // The resident pattern: upload once, work on the device, download once.
    let t = Instant::now();
    let da = Array::new(ctx.clone(), m, n, Some(&a))?;
    let dt = Array::new::<f64>(ctx.clone(), n, m, None)?;
    let upload_s = t.elapsed().as_secs_f64();
    let per = time(&ctx, steps, || dense::transpose(&da, &dt, None))?;
    let mut back = vec![f64::NAN; m * n];
    let t = Instant::now();
    dt.download(0, &mut back, "at")?;
    let download_s = t.elapsed().as_secs_f64();
    let same = back == serial;
    println!(
        "fegpu transpose (array resident on the {} backend): {} ms per call, {} GB/s, {}x the serial loop",
        ctx.backend_name(),
        significant(per * 1e3, 3),
        significant(2.0 * (m * n * 8) as f64 / per / 1e9, 3),
        significant(serial_s / per, 3)
    );
    println!("upload {:.1} ms and download {:.1} ms, paid once outside the loop", upload_s * 1e3, download_s * 1e3);
    println!("result identical to the serial loop: {}", if same { "yes" } else { "NO" });
    if !same {
        return Err(fegpu::error::Error::new(fegpu::error::ErrorKind::Internal, "showcase result differs from the serial loop"));
    }
    Ok(())
}

/// The Krylov method `--method NAME` names (`restart` for GMRES), or the
/// message that says what is expected.
pub fn method_named(name: &str, restart: usize) -> std::result::Result<Method, String> {
    Ok(match name {
        "cg" => Method::Cg,
        "bicgstab" => Method::Bicgstab,
        "gmres" => Method::Gmres { restart },
        "bicg" => Method::Bicg,
        "cgs" => Method::Cgs,
        m => return Err(format!("--method {m}: expected cg, bicgstab, gmres, bicg or cgs")),
    })
}

/// The preconditioner `--precond NAME` names (`ilu0-jacobi[:SWEEPS]`), or
/// the message that says what is expected.
pub fn precond_named(v: &str) -> std::result::Result<Precond, String> {
    Ok(match v.split_once(':').unwrap_or((v, "")) {
        ("none", "") => Precond::None,
        ("jacobi", "") => Precond::Jacobi,
        ("ilu0", "") => Precond::Ilu0,
        ("amg", "") => Precond::Amg,
        ("ilu0-multicolour", "") => Precond::Ilu0Multicolour { split: false },
        ("ilu0-multicolour-split", "") => Precond::Ilu0Multicolour { split: true },
        ("ilu0-jacobi", k) => Precond::Ilu0Jacobi {
            sweeps: if k.is_empty() {
                Precond::DEFAULT_JACOBI_SWEEPS
            } else {
                k.parse().map_err(|_| format!("--precond {v}: the sweeps after ':' must be a count"))?
            },
        },
        _ => {
            return Err(format!(
            "--precond {v}: expected none, jacobi, ilu0, ilu0-jacobi[:SWEEPS], ilu0-multicolour, ilu0-multicolour-split or amg"
        ))
        }
    })
}
