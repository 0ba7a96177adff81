//! `fegpu bench pipeline`: pipelined axpby (4e6 and 1e8 elements), batched
//! inner products, gemm, gemv and the panel transpose on host arrays, versions 1, 2 and 3 at 1..16 streams,
//! measured against the overlap model's prediction from the copy and kernel
//! times measured in the same run, with the pinned bandwidth (the ceiling)
//! measured beside each operation. The model's copy times keep the split of
//! event-timed one-chunk calls, scaled to the untimed one-chunk call's wall
//! time (the shares on the unscaled events are printed beside). The time a
//! plan hides is measured against version 1 in as many chunks, called
//! alternately with it (more pairs for shorter calls, with the standard
//! error of the median saving; staged, its order also against the other,
//! forced); the model's overhead per operation of each phase is measured for
//! each operation too (version 1 in 16 chunks against one, timed by events,
//! in pairs).

use super::{describe, median, open_context};
use fegpu::context::Context;
use fegpu::error::Result;
use fegpu::pipeline::model::{self, Times};
use fegpu::pipeline::{self, Plan, Strategy, OVERHEAD};
use std::time::Instant;

/// The host link as `pinned_bandwidth` measures it.
struct Link {
    /// Bytes per second of a 256 MiB page-locked copy each way (best of the repetitions).
    up: f64,
    down: f64,
    /// The share of its speed each direction keeps while both run at once:
    /// the median of the repetitions' own shares, each from copies timed
    /// back to back (the model's input: its other inputs are medians too,
    /// and the rows' savings medians of calls), and the ratio of the best
    /// times, which may come from different moments of a drifting link
    /// (round 21: 84% against a median of 80%, which moved axpby 1e8's
    /// pooled share from 89% to 95%).
    duplex: f64,
    duplex_best: f64,
}

/// Repetitions of `pinned_bandwidth`: the duplex share moves the model's
/// hideable time of axpby, whose copy-out hides under copy-ins, by about
/// 1.7% per point (0.3% for the inner products, with little to copy out).
const LINK_REPS: usize = 9;

/// Host-to-device and device-to-host bandwidth of a 256 MiB page-locked
/// buffer, and the share of it each direction keeps when both run at once.
fn pinned_bandwidth(ctx: &Context) -> Result<Link> {
    let Some(g) = ctx.gpu() else { return Ok(Link { up: f64::NAN, down: f64::NAN, duplex: f64::NAN, duplex_best: f64::NAN }) };
    let n = 1usize << 25;
    let (mut up_host, mut down_host) = (g.pinned::<f64>(n)?, g.pinned::<f64>(n)?);
    up_host.as_mut_slice()?.fill(1.0);
    let (mut up_dev, down_dev) = (g.alloc::<f64>(n)?, g.alloc::<f64>(n)?);
    let lanes = g.lanes(2)?;
    g.synchronize("bench")?;
    let (mut up, mut down, mut both) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    let mut shares = Vec::with_capacity(LINK_REPS);
    for _ in 0..LINK_REPS {
        // SAFETY: pinned memory, alive and untouched until the lanes are synchronised below.
        unsafe {
            let a = lanes[0].mark()?;
            lanes[0].upload(&up_host.as_mut_slice()?[..], &mut up_dev, 0)?;
            let b = lanes[0].mark()?;
            lanes[0].download(&down_dev, 0, &mut down_host.as_mut_slice()?[..])?;
            let c = lanes[0].mark()?;
            lanes[0].synchronize("bench")?;
            let (up_now, down_now) = (a.seconds_until(&b)?, b.seconds_until(&c)?);
            // Both directions at once, on two lanes.
            let start = std::time::Instant::now();
            lanes[0].upload(&up_host.as_mut_slice()?[..], &mut up_dev, 0)?;
            lanes[1].download(&down_dev, 0, &mut down_host.as_mut_slice()?[..])?;
            lanes[0].synchronize("bench")?;
            lanes[1].synchronize("bench")?;
            let both_now = start.elapsed().as_secs_f64();
            shares.push((up_now.max(down_now) / both_now).min(1.0));
            (up, down, both) = (up.min(up_now), down.min(down_now), both.min(both_now));
        }
    }
    // Each direction alone would need `up` and `down`; together they took `both`.
    let duplex_best = (up.max(down) / both).min(1.0);
    Ok(Link { up: 8.0 * n as f64 / up, down: 8.0 * n as f64 / down, duplex: median(shares), duplex_best })
}

/// The host-to-device copy rate of a 256 MiB page-locked buffer while the
/// inner-product kernel streams device memory on another lane, as a share of
/// its rate alone: what a bandwidth-bound kernel takes from a copy it
/// overlaps (best of 4 each).
fn copy_share_under_load(ctx: &Context) -> Result<f64> {
    let Some(g) = ctx.gpu() else { return Ok(f64::NAN) };
    let n = 1usize << 25;
    let mut host = g.pinned::<f64>(n)?;
    host.as_mut_slice()?.fill(1.0);
    let mut dev = g.alloc::<f64>(n)?;
    // Two 1 GiB operands: one launch reads 2 GiB, about 0.7 ms.
    let (m, cols) = (1000usize, (1usize << 27) / 1000);
    let mut bufs = vec![g.alloc::<f64>(m * cols)?, g.alloc::<f64>(m * cols)?, g.alloc::<f64>(cols)?];
    for b in bufs.iter_mut() {
        g.fill_bytes(b, 0)?;
    }
    let lanes = g.lanes(2)?;
    g.synchronize("bench")?;
    let (mut alone, mut loaded) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..4 {
        for load in [false, true] {
            if load {
                // Enough launches to outlast the copy (about 5 ms) twice over.
                for _ in 0..14 {
                    fegpu::pipeline::cuda::launch(
                        g,
                        &lanes[1],
                        fegpu::pipeline::Kernel::ColumnDots { m },
                        cols,
                        &mut bufs,
                        &[None, None, None],
                    )?;
                }
            }
            // SAFETY: pinned memory, untouched until the lanes are synchronised below.
            let seconds = unsafe {
                let a = lanes[0].mark()?;
                lanes[0].upload(&host.as_mut_slice()?[..], &mut dev, 0)?;
                let b = lanes[0].mark()?;
                lanes[0].synchronize("bench")?;
                a.seconds_until(&b)?
            };
            lanes[1].synchronize("bench")?;
            if load {
                loaded = loaded.min(seconds);
            } else {
                alone = alone.min(seconds);
            }
        }
    }
    Ok(alone / loaded)
}

/// Median wall seconds of seven calls after one.
fn wall(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut v = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    Ok(median(v))
}

/// What `paired` measured for one plan.
struct Paired {
    /// Median wall seconds of the plan's calls.
    measured: f64,
    /// Median of the pairs' differences: the seconds the plan saved.
    saved: f64,
    /// Standard error of that median, from the pairs' spread.
    saved_error: f64,
    pairs: usize,
    released_on_host: bool,
}

/// Least and most pairs per plan, and the wall time a plan's pairs may take
/// beyond the least: a long call (the inner products, 30 ms, whose hideable
/// time is 2% of it) gets about 50 pairs, a short one the most. At 25 pairs
/// a noisy link (round 20: 48-55 GB/s between measurements) left the inner
/// products' shares at ± 20-76 points.
const PAIRS: (usize, usize) = (9, 61);
const PAIR_BUDGET_SECONDS: f64 = 3.0;

/// The base call (`call(false)`: version 1 in as many chunks, or the other
/// order) and the plan's (`call(true)`) alternately (`PAIRS`,
/// `PAIR_BUDGET_SECONDS`). Pairing cancels the drift of transfer speed
/// between calls, which is as large as the whole saving for an operation
/// whose kernel is short.
fn paired(mut call: impl FnMut(bool) -> Result<pipeline::Report>) -> Result<Paired> {
    let released_on_host = call(true)?.released_on_host;
    let (mut times, mut saved) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while saved.len() < PAIRS.0 || (saved.len() < PAIRS.1 && start.elapsed().as_secs_f64() < PAIR_BUDGET_SECONDS) {
        let t = Instant::now();
        call(false)?;
        let tb = t.elapsed().as_secs_f64();
        let t = Instant::now();
        call(true)?;
        let tp = t.elapsed().as_secs_f64();
        times.push(tp);
        saved.push(tb - tp);
    }
    let pairs = saved.len();
    Ok(Paired { measured: median(times), saved_error: median_error(&saved), saved: median(saved), pairs, released_on_host })
}

/// The standard error of the median of `v`, from its interquartile range
/// (σ ≈ IQR / 1.349 for a normal spread; the median's error ≈ 1.253 σ / √n),
/// so that one outlying call does not inflate it.
fn median_error(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    1.253 * (at(0.75) - at(0.25)) / 1.349 / (s.len() as f64).sqrt()
}

/// Pairs of event-timed version-1 calls, in one chunk and in 16, behind the
/// model's inputs and the overhead per operation of each phase.
const OVERHEAD_PAIRS: usize = 9;

/// One operation over every version and stream count.
fn sweep(ctx: &Context, what: &str, mut call: impl FnMut(Option<Plan>) -> Result<pipeline::Report>) -> Result<()> {
    let engines = ctx.gpu().map_or(1, |g| g.info.copy_engines.max(1) as usize);
    // The duplex share drifts over a run: measured again beside each operation.
    let link = pinned_bandwidth(ctx)?;
    let duplex = link.duplex;
    // Version 1 timed per phase with events (the profile on), in one chunk
    // (the model's inputs: the median of each phase) and in 16, alternately:
    // the overhead per operation of each phase is the median over the pairs
    // of (16 chunks - 1 chunk) / 15, so that drift between calls cancels.
    let serial_plan = Plan::SERIAL;
    let serial_in = |chunks: usize| Some(Plan { strategy: Strategy::Serial, streams: 1, chunks });
    let phases = |t: &Times| [t.h2d, t.kernel, t.d2h, t.setup];
    ctx.profile.set_enabled(true);
    let timed_pairs: Result<Vec<(pipeline::Report, pipeline::Report)>> =
        (0..=OVERHEAD_PAIRS).map(|_| Ok((call(serial_in(1))?, call(serial_in(16))?))).collect();
    ctx.profile.set_enabled(false);
    // The first pair warms up.
    let timed_pairs: Vec<([f64; 4], [f64; 4])> = timed_pairs?
        .iter()
        .skip(1)
        .map(|(one, sixteen)| (phases(&one.times.unwrap_or_default()), phases(&sixteen.times.unwrap_or_default())))
        .collect();
    let of_one = |p: usize| median(timed_pairs.iter().map(|(one, _)| one[p]).collect());
    let events = Times { h2d: of_one(0), kernel: of_one(1), d2h: of_one(2), setup: of_one(3) };
    let overhead: [f64; 3] =
        std::array::from_fn(|p| median(timed_pairs.iter().map(|(one, sixteen)| (sixteen[p] - one[p]) / 15.0).collect()).max(0.0));
    let r = call(Some(serial_plan))?;
    // Version 1 in one chunk, untimed and back to back as the rows' calls run.
    let v1 = wall(|| call(Some(serial_plan)).map(|_| ()))?;
    // The timed calls' event-timed phases have added up to more than the
    // same calls take untimed (round 19: 2.40 ms of phases against 1.89 ms),
    // and the copy-out sets most of the hideable time. The model's copy times keep the events' split but are scaled so
    // that its version 1 takes the measured wall time.
    let copies = events.h2d + events.d2h;
    let scale =
        if copies > 0.0 { ((v1 - events.setup - events.kernel - overhead.iter().sum::<f64>()) / copies).max(0.0) } else { 1.0 };
    let t = Times { h2d: events.h2d * scale, d2h: events.d2h * scale, ..events };
    // The transfers against the pinned rates: the one-chunk call's copies
    // run alone, so its wall time less its kernel is their time.
    let at_pinned = r.h2d_bytes as f64 / link.up + r.d2h_bytes as f64 / link.down;
    println!(
        "{what}: H2D {:.1} MB in {:.2} ms (setup {:.2} ms; {:.1} GB/s, {:.0}% of pinned), kernel {:.2} ms, D2H {:.1} MB in {:.2} ms (event-timed)",
        r.h2d_bytes as f64 / 1e6,
        (events.h2d + events.setup) * 1e3,
        events.setup * 1e3,
        r.h2d_bytes as f64 / (events.h2d + events.setup) / 1e9,
        100.0 * r.h2d_bytes as f64 / (events.h2d + events.setup) / link.up,
        events.kernel * 1e3,
        r.d2h_bytes as f64 / 1e6,
        events.d2h * 1e3
    );
    println!(
        "  version 1 in one chunk, untimed: {:.2} ms; its copies (wall less kernel) at {:.0}% of the pinned rates; the model's copy times: the events' x {:.3} (H2D {:.2} ms, D2H {:.2} ms)",
        v1 * 1e3,
        100.0 * at_pinned / (v1 - events.kernel),
        scale,
        t.h2d * 1e3,
        t.d2h * 1e3
    );
    println!(
        "  the link now: H2D {:.1} GB/s, D2H {:.1} GB/s; duplex share {:.0}% (the model's: the median of {LINK_REPS} repetitions' own; from the best times: {:.0}%)",
        link.up / 1e9,
        link.down / 1e9,
        100.0 * link.duplex,
        100.0 * link.duplex_best
    );
    println!(
        "  overhead per operation, measured (version 1 in 16 chunks against 1, median of {OVERHEAD_PAIRS} pairs): copy-in {:.1} us, kernel {:.1} us, copy-out {:.1} us; the fixed model: {:.0} us each",
        overhead[0] * 1e6,
        overhead[1] * 1e6,
        overhead[2] * 1e6,
        OVERHEAD * 1e6
    );
    println!(
        "  {:<10} {:>7} {:>12} {:>13} {:>10} {:>6} {:>16} {:>18} {:>16}",
        "version",
        "streams",
        "measured ms",
        "predicted ms",
        "saved ms",
        "pairs",
        "hidden/hideable",
        "(event-timed) ms",
        "hidden/hideable"
    );
    println!("  (saved: median against version 1 in as many chunks, called alternately; hideable: the model's version 1 in as many chunks less its prediction;");
    println!("   ± the standard error of the median saving, from the pairs' spread, as a share of the hideable time; the last two columns: the model on the events' copy times;");
    println!("   staged: the seconds its order (kernels queued by the host or on the device, model::release_on_host) saved against the other, forced, in pairs)");
    println!(
        "  {:<10} {:>7} {:>12.2} {:>13.2} {:>53.2}",
        "1 serial",
        1,
        v1 * 1e3,
        model::predict_phases(Strategy::Serial, 1, 1, t, engines, overhead, duplex) * 1e3,
        model::predict_phases(Strategy::Serial, 1, 1, events, engines, overhead, duplex) * 1e3
    );
    for (name, strategy) in [("2 chunk", Strategy::PerChunk), ("3 staged", Strategy::Staged)] {
        // Over 2..16 streams: seconds saved, their variance, seconds hideable, the least row share.
        let (mut saved_sum, mut variance, mut hideable_sum, mut least) = (0.0, 0.0, 0.0, f64::INFINITY);
        for n in [1usize, 2, 3, 4, 6, 8, 12, 16] {
            let plan = Plan { strategy, streams: n, chunks: n };
            // Against version 1 in the same n chunks, so that what is compared is
            // the overlap alone, not the cost of cutting the work into chunks.
            let serial_n = Plan { strategy: Strategy::Serial, streams: 1, chunks: n };
            let row = paired(|is_plan| call(Some(if is_plan { plan } else { serial_n })))?;
            // Staged: the order the rule chose against the other one, forced.
            let against_other = if strategy == Strategy::Staged && n > 1 {
                let set = |o: Option<bool>| fegpu::pipeline::cache(ctx).force_staged_order(o);
                let other = !row.released_on_host;
                let versus = paired(|is_plan| {
                    set(if is_plan { None } else { Some(other) });
                    call(Some(plan))
                });
                set(None);
                let versus = versus?;
                format!(
                    "  {:+.3} ± {:.3} ms against {}",
                    versus.saved * 1e3,
                    versus.saved_error * 1e3,
                    if other { "the host order" } else { "the device order" }
                )
            } else {
                String::new()
            };
            // What the model says the plan can hide: its version 1 in n chunks less its prediction.
            let model = |t: Times| {
                let predicted = model::predict_phases(strategy, n, n, t, engines, overhead, duplex);
                (predicted, model::predict_phases(Strategy::Serial, 1, n, t, engines, overhead, duplex) - predicted)
            };
            let ((predicted, h), (predicted_events, h_events)) = (model(t), model(events));
            let share = |h: f64| {
                if n > 1 {
                    format!("{:.0}% ± {:.0}", 100.0 * row.saved / h, 100.0 * row.saved_error / h)
                } else {
                    String::new()
                }
            };
            if n > 1 {
                saved_sum += row.saved;
                variance += row.saved_error.powi(2);
                hideable_sum += h;
                least = least.min(row.saved / h);
            }
            println!(
                "  {name:<10} {n:>7} {:>12.2} {:>13.2} {:>10.3} {:>6} {:>16} {:>18.2} {:>16}{}{}",
                row.measured * 1e3,
                predicted * 1e3,
                row.saved * 1e3,
                row.pairs,
                share(h),
                predicted_events * 1e3,
                share(h_events),
                if row.released_on_host { "  kernels queued by the host" } else { "" },
                against_other
            );
        }
        println!(
            "  version {}, 2..16 streams together: {:.0}% ± {:.0} of the hideable time hidden ({:.3} of {:.3} ms); the least row {:.0}%",
            &name[..1],
            100.0 * saved_sum / hideable_sum,
            100.0 * variance.sqrt() / hideable_sum,
            saved_sum * 1e3,
            hideable_sum * 1e3,
            100.0 * least
        );
    }
    let best = model::best_streams(t, engines, OVERHEAD);
    let auto = call(None)?.plan;
    println!("  the model's choice: {best} streams; the automatic plan: {:?} on {} streams", auto.strategy, auto.streams);
    Ok(())
}

pub fn run() -> Result<()> {
    let ctx = open_context()?;
    println!("fegpu bench pipeline on {}", describe(&ctx));
    if ctx.gpu().is_none() {
        println!("(no GPU: the pipelines run the host loops; nothing to overlap)");
        return Ok(());
    }
    // The sweeps read every timed call's phases.
    ctx.profile.set_every_call(true);
    let link = pinned_bandwidth(&ctx)?;
    println!(
        "pinned host memory: H2D {:.1} GB/s, D2H {:.1} GB/s (256 MiB, best of {LINK_REPS}); both at once: each at {:.0}% (median of the repetitions; {:.0}% from the best times; measured again beside each operation for the model)",
        link.up / 1e9,
        link.down / 1e9,
        100.0 * link.duplex,
        100.0 * link.duplex_best
    );
    println!(
        "host-to-device copy while a bandwidth-bound kernel runs beside it: {:.0}% of its rate alone",
        100.0 * copy_share_under_load(&ctx)?
    );
    let engines = ctx.gpu().map_or(0, |g| g.info.copy_engines);
    println!("copy engines: {engines}; model overhead per operation {:.0} us", OVERHEAD * 1e6);
    for n in [4_000_000usize, 100_000_000] {
        let mut x: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 * 1e-3).collect();
        let mut y: Vec<f64> = vec![1.0; n];
        for registered in [true, false] {
            if registered {
                ctx.register_host(x.as_mut_ptr().cast(), 8 * n)?;
                ctx.register_host(y.as_mut_ptr().cast(), 8 * n)?;
            }
            let what = format!("axpby n = {n} ({})", if registered { "registered" } else { "unregistered: staging ring" });
            sweep(&ctx, &what, |plan| pipeline::axpby(&ctx, 1.0001, &x, 0.5, &mut y, plan))?;
            if registered {
                ctx.unregister_host(x.as_mut_ptr().cast())?;
                ctx.unregister_host(y.as_mut_ptr().cast())?;
            }
            if n > 4_000_000 {
                break; // the staging ring at 1e8 adds only host copies
            }
        }
    }
    // What the profile costs: the same staged calls with it off and on.
    {
        let n = 4_000_000;
        let x = vec![0.5; n];
        let mut y = vec![1.0; n];
        ctx.register_host(x.as_ptr() as *mut u8, 8 * n)?;
        ctx.register_host(y.as_mut_ptr().cast(), 8 * n)?;
        let plan = Some(Plan { strategy: Strategy::Staged, streams: 8, chunks: 8 });
        // The mean cost per call as a legacy loop pays it: the profile off and
        // on, interleaved call by call over 64 rounds so that drift falls on
        // both alike; on with sampling (one call in TIMED_EVERY timed after the
        // first few), then timing every call.
        pipeline::axpby(&ctx, 1.0, &x, 0.5, &mut y, plan)?;
        let mut cost = |every_call: bool| -> Result<[f64; 2]> {
            ctx.profile.set_every_call(every_call);
            let mut total = [0.0; 2];
            for _ in 0..64 {
                for (on, seconds) in total.iter_mut().enumerate() {
                    ctx.profile.set_enabled(on == 1);
                    let start = Instant::now();
                    pipeline::axpby(&ctx, 1.0, &x, 0.5, &mut y, plan)?;
                    *seconds += start.elapsed().as_secs_f64() / 64.0;
                }
            }
            ctx.profile.set_enabled(false);
            Ok(total)
        };
        let ([off, on], [off_every, every]) = (cost(false)?, cost(true)?);
        println!(
            "profile overhead, axpby 4e6 staged on 8 streams, mean of 64 calls, interleaved with 64 off: sampled {:.3} ms against {:.3} off ({:+.1}%); timing every call {:.3} ms against {:.3} ({:+.1}%)",
            on * 1e3,
            off * 1e3,
            100.0 * (on / off - 1.0),
            every * 1e3,
            off_every * 1e3,
            100.0 * (every / off_every - 1.0)
        );
        ctx.unregister_host(x.as_ptr() as *mut u8)?;
        ctx.unregister_host(y.as_mut_ptr().cast())?;
    }
    // The batched inner products: 1e5 column pairs of 1000 (1e8 elements per matrix).
    let (m, ncols) = (1000, 100_000);
    let mut a: Vec<f64> = (0..m * ncols).map(|i| (i % 7) as f64).collect();
    let mut b: Vec<f64> = (0..m * ncols).map(|i| (i % 5) as f64 * 0.5).collect();
    let mut out = vec![0.0; ncols];
    ctx.register_host(a.as_mut_ptr().cast(), 8 * a.len())?;
    ctx.register_host(b.as_mut_ptr().cast(), 8 * b.len())?;
    ctx.register_host(out.as_mut_ptr().cast(), 8 * ncols)?;
    sweep(&ctx, &format!("column dots {m} x {ncols} (registered)"), |plan| {
        pipeline::column_dots(&ctx, m, &a, &b, &mut out, plan)
    })?;
    if let Some(s) = ctx.profile.op("column_dots") {
        println!("serial host loop of the inner products: {:.1} ms per call", s.serial_seconds / s.calls as f64 * 1e3);
    }
    ctx.unregister_host(a.as_mut_ptr().cast())?;
    ctx.unregister_host(b.as_mut_ptr().cast())?;
    ctx.unregister_host(out.as_mut_ptr().cast())?;
    // Matrix products (cuBLAS) and the panel transpose, registered.
    let n = 4096;
    let mut a: Vec<f64> = (0..n * n).map(|i| ((i % 13) as f64 - 6.0) * 0.1).collect();
    let mut b: Vec<f64> = (0..n * n).map(|i| ((i % 7) as f64 - 3.0) * 0.1).collect();
    let mut c = vec![0.0; n * n];
    for v in [&mut a, &mut b, &mut c] {
        ctx.register_host(v.as_mut_ptr().cast(), 8 * v.len())?;
    }
    sweep(&ctx, &format!("gemm {n} x {n} x {n}, beta = 0 (registered; {:.0} GFLOP)", 2.0 * (n as f64).powi(3) / 1e9), |plan| {
        pipeline::gemm(&ctx, n, n, n, 1.0, &a, &b, 0.0, &mut c, plan)
    })?;
    let x = b[..n].to_vec();
    sweep(&ctx, &format!("gemv {n} x {n} (registered A)"), |plan| {
        pipeline::gemv(&ctx, n, n, 1.0, &a, &x, 0.0, &mut c[..n], plan)
    })?;
    sweep(&ctx, &format!("transpose {n} x {n} in column panels (registered)"), |plan| {
        pipeline::transpose(&ctx, n, n, &a, &mut c, plan)
    })?;
    for v in [&mut a, &mut b, &mut c] {
        ctx.unregister_host(v.as_mut_ptr().cast())?;
    }
    println!("\nprofile of the timed calls:\n{}", ctx.profile.table());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard error `median_error` estimates from one sample is the
    /// spread of the medians of many samples: normal draws (Box-Muller over a
    /// 64-bit LCG), 25 per sample as in a 30 ms row.
    #[test]
    fn median_error_is_the_spread_of_medians() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let mut normal = move || (-2.0 * uniform().ln()).sqrt() * (std::f64::consts::TAU * uniform()).cos();
        let (trials, n) = (4000, 25);
        let (mut medians, mut estimates) = (Vec::new(), Vec::new());
        for _ in 0..trials {
            let v: Vec<f64> = (0..n).map(|_| 3.0 + 0.5 * normal()).collect();
            estimates.push(median_error(&v));
            medians.push(median(v));
        }
        let mean = medians.iter().sum::<f64>() / trials as f64;
        let spread = (medians.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (trials - 1) as f64).sqrt();
        let estimate = estimates.iter().sum::<f64>() / trials as f64;
        // Theory: 1.253 x 0.5 / 5 = 0.125.
        assert!((spread / 0.1253 - 1.0).abs() < 0.08, "spread of the medians {spread}");
        assert!((estimate / spread - 1.0).abs() < 0.12, "estimate {estimate} against {spread}");
    }
}
