//! The `fegpu` command: `info`, `bench transpose`, and the showcase (no arguments).

use fegpu::gpu::Gpu;
use std::process::ExitCode;

const USAGE: &str = "usage:
  fegpu                      showcase: a legacy transpose loop on the best backend present
  fegpu info                 backends, devices, compute capability, NVRTC version
  fegpu bench transpose [--size MxN]... [--reps R]
                             transpose and copy kernels: time, GB/s, fraction of the
                             device-to-device copy measured in the same run, speedup
                             over the serial loop; pinned vs pageable uploads
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
    let ctx = fegpu::bench::open_context()?;
    println!("AUTO selects: {}", fegpu::bench::describe(&ctx));
    Ok(())
}

fn parse_size(s: &str) -> Option<(usize, usize)> {
    let (m, n) = s.split_once(['x', 'X'])?;
    Some((m.parse().ok()?, n.parse().ok()?))
}

fn bench(args: &[String]) -> fegpu::Result<()> {
    let bad = |m: String| fegpu::Error::invalid(format!("{m}\n{USAGE}"));
    match args.first().map(String::as_str) {
        Some("transpose") => {
            let (mut sizes, mut reps) = (Vec::new(), 20);
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--size" => sizes.push(it.next().and_then(|s| parse_size(s)).ok_or_else(|| bad("--size wants MxN".into()))?),
                    "--reps" => reps = it.next().and_then(|s| s.parse().ok()).ok_or_else(|| bad("--reps wants a count".into()))?,
                    other => return Err(bad(format!("unknown option {other}"))),
                }
            }
            if sizes.is_empty() {
                sizes = vec![(1024, 1024), (4096, 4096), (8192, 8192)];
            }
            fegpu::bench::transpose(&sizes, reps.max(1))
        }
        other => Err(bad(format!("unknown benchmark {other:?}"))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        None | Some("showcase") => fegpu::bench::showcase(),
        Some("info") => info(),
        Some("bench") => bench(&args[1..]),
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
