//! Pipelined operations on host arrays: the caller's arrays stay on the host;
//! the work is cut into chunks that move through several streams, copy-in,
//! kernel and copy-out overlapping, and the call returns when the result is
//! back. Host arrays registered with the context (`fegpu_host_register`) are
//! copied directly; others go through a page-locked staging ring.
//!
//! Strategies (the concrete-dam study's versions, see `model`): serial (one
//! stream), per-chunk (copy-in, kernel, copy-out per chunk across the
//! streams) and staged (all copy-ins of a round, then all kernels, then all
//! copy-outs; once an operation's times are known, its kernels are short
//! beside its copies and little comes back, the host queues each kernel and
//! copy-out as its chunk lands, `model::release_on_host`). Automatic: the
//! first two calls of an operation run serially and measure its copy and
//! kernel times (the first warms up); later calls use the staged strategy
//! with the stream count the model predicts fastest.

pub mod cpu;
pub mod cuda;
pub mod model;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::profile::OpStats;
use model::Times;
use std::collections::HashMap;
use std::sync::Mutex;

/// Most streams a pipeline uses.
pub const MAX_STREAMS: usize = 16;
/// The operations' names, as the profile keys them.
pub const OPERATIONS: [&str; 5] = ["axpby", "column_dots", "gemm", "gemv", "transpose"];
/// Per-operation latency (launch, copy set-up) the model adds, in seconds.
pub const OVERHEAD: f64 = 8e-6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Serial,
    PerChunk,
    Staged,
}

/// How one call is run: `chunks` equal chunks dealt round-robin to `streams` streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub strategy: Strategy,
    pub streams: usize,
    pub chunks: usize,
}

impl Plan {
    /// One stream, one chunk: the serial order.
    pub const SERIAL: Plan = Plan { strategy: Strategy::Serial, streams: 1, chunks: 1 };
}

/// A host array an operation reads, writes, or both.
pub enum Arg<'a> {
    In(&'a [f64]),
    InOut(&'a mut [f64]),
    Out(&'a mut [f64]),
}

impl Arg<'_> {
    /// The host array's start and length, whichever way it is used.
    pub fn host(&self) -> (*const f64, usize) {
        match self {
            Arg::In(v) => (v.as_ptr(), v.len()),
            Arg::InOut(v) | Arg::Out(v) => (v.as_ptr(), v.len()),
        }
    }
}

/// How an array is cut into the items the pipeline chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Item i is elements [i p, (i + 1) p): one element, or a column of a column-major matrix with p rows.
    Items(usize),
    /// Item i is row i of a column-major matrix with leading dimension `ld` and `cols` columns.
    Rows { ld: usize, cols: usize },
    /// Not chunked: the whole array goes to the device once per call (inputs only).
    Whole,
}

/// The chunk kernels and the arguments each takes, in order.
#[derive(Debug, Clone, Copy)]
pub enum Kernel {
    /// x (in), y (in/out): y = a x + b y.
    Axpby { a: f64, b: f64 },
    /// A, B (in, columns of m), out (out): out(j) = A(:,j).B(:,j).
    ColumnDots { m: usize },
    /// A (whole, m x k), B (in, columns of k), C (columns of m, in/out unless
    /// beta = 0): C = alpha A B + beta C, through cuBLAS.
    Gemm { m: usize, k: usize, alpha: f64, beta: f64 },
    /// A (rows of an m x n matrix), x (whole, n), y (in/out unless beta = 0):
    /// y = alpha A x + beta y, through cuBLAS.
    Gemv { n: usize, alpha: f64, beta: f64 },
    /// A (in, columns of m), At (out, rows of the n x m transpose): At = A^T,
    /// in column panels.
    Transpose { m: usize },
}

pub struct Op<'a> {
    pub name: &'static str,
    pub kernel: Kernel,
    pub items: usize,
    pub args: Vec<(Arg<'a>, Layout)>,
}

/// What a call did.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    pub plan: Plan,
    pub wall_seconds: f64,
    /// Per-phase device times when the call was timed (the first two automatic calls,
    /// or profiling on), summed over chunks.
    pub times: Option<Times>,
    /// Timed calls: the seconds the call's copy-in, kernel and copy-out
    /// activity overlapped, from its own events (see `model::overlapped`).
    pub overlapped_seconds: Option<f64>,
    /// Staged, the kernels were queued from the host as their chunks landed
    /// (`model::release_on_host`).
    pub released_on_host: bool,
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
}

/// Per context: the model's inputs per operation (seconds per item of each
/// phase, from the first two calls) and the CPU reference's seconds per item
/// for the profile.
#[derive(Default)]
pub struct Cache {
    rates: Mutex<HashMap<Shape, Measured>>,
    serial: Mutex<HashMap<Shape, f64>>,
    pub(crate) staging: Mutex<Vec<crate::gpu::Pinned<f64>>>,
    /// Chunk buffers kept between calls: allocating and mapping fresh device
    /// memory every call costs as much as the copies (BENCHMARKS.md).
    pub(crate) buffers: Mutex<Vec<crate::gpu::DeviceBuffer<f64>>>,
    /// The staged strategy's order forced (true: kernels queued by the host)
    /// instead of `model::release_on_host`; see `force_staged_order`.
    pub(crate) release_override: Mutex<Option<bool>>,
}

/// The context's pipeline cache (made on the first pipeline call).
pub fn cache(ctx: &Context) -> std::sync::Arc<Cache> {
    ctx.extensions.get::<Cache>()
}

impl Cache {
    /// Forces the staged strategy's issue order for this context's later
    /// calls (Some(true): the host queues each kernel as its chunk lands;
    /// Some(false): the kernels wait on the device; None: the rule of
    /// `model::release_on_host` decides), to time the two orders against
    /// each other on the machine at hand (`fegpu bench pipeline` does).
    pub fn force_staged_order(&self, order: Option<bool>) {
        *self.release_override.lock().unwrap_or_else(|p| p.into_inner()) = order;
    }
}

/// An operation's per-item rates, and whether they come from a call after
/// its first: the first call's kernel phase also holds one-time costs (NVRTC
/// compiling the kernel, cuBLAS loading its kernels lazily: 2-10 ms, seen
/// on the H100 as gemm, gemv and the transpose never getting the host order
/// of `model::release_on_host`), so the second call measures again and only
/// its rates drive the plan.
#[derive(Clone, Copy)]
struct Measured {
    rate: Times,
    warm: bool,
}

/// What per-item rates are kept for: the operation and the elements per item
/// of each argument (whole arguments by their size), so differently shaped
/// calls of one operation do not share rates.
type Shape = (&'static str, Vec<usize>);

fn shape(op: &Op) -> Shape {
    let sizes = op
        .args
        .iter()
        .map(|(arg, layout)| match layout {
            Layout::Items(p) => *p,
            Layout::Rows { cols, .. } => *cols,
            Layout::Whole => arg.host().1,
        })
        .collect();
    (op.name, sizes)
}

fn per_item(t: Times, items: usize) -> Times {
    let n = items as f64;
    Times { h2d: t.h2d / n, kernel: t.kernel / n, d2h: t.d2h / n, setup: t.setup }
}

/// The reverse of `per_item`: a call's times on `items` items.
fn whole(rate: Times, items: usize) -> Times {
    let n = items as f64;
    Times { h2d: rate.h2d * n, kernel: rate.kernel * n, d2h: rate.d2h * n, setup: rate.setup }
}

/// Runs `op` on the context's backend with `plan`, or automatically.
pub fn run(ctx: &Context, mut op: Op, plan: Option<Plan>) -> Result<Report> {
    let cache = cache(ctx);
    let profiling = ctx.profile.enabled();
    let timed_profile = profiling && ctx.profile.times_next(op.name);
    let key = shape(&op);
    if profiling && op.items > 0 && !cache.serial.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key) {
        let per_item = cpu::time_reference(&op);
        cache.serial.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), per_item);
    }
    let start = std::time::Instant::now();
    let report = match ctx.gpu() {
        None => {
            cpu::apply(&mut op);
            let plan = plan.unwrap_or(Plan::SERIAL);
            Report {
                plan,
                wall_seconds: start.elapsed().as_secs_f64(),
                times: None,
                overlapped_seconds: None,
                released_on_host: false,
                h2d_bytes: 0,
                d2h_bytes: 0,
            }
        }
        Some(g) => {
            let measured = cache.rates.lock().unwrap_or_else(|p| p.into_inner()).get(&key).copied();
            let known = measured.filter(|m| m.warm).map(|m| m.rate);
            let registered = |ptr: *const f64, len: usize| ctx.is_registered(ptr as usize, len * 8);
            let (plan, measure) = match (plan, known) {
                (Some(p), Some(r)) if p.streams == 0 => (Plan { streams: choose(r, &op, &registered, g), ..p }, timed_profile),
                (Some(p), None) if p.streams == 0 => (Plan::SERIAL, true),
                (Some(p), _) => (p, timed_profile),
                (None, Some(r)) => {
                    let n = choose(r, &op, &registered, g);
                    (Plan { strategy: Strategy::Staged, streams: n, chunks: n }, timed_profile)
                }
                (None, None) => (Plan::SERIAL, true),
            };
            let plan = Plan { chunks: if plan.chunks == 0 { plan.streams } else { plan.chunks }, ..plan };
            // Known rates say whether the kernels leave the host time to queue them (staged only).
            let rule = || known.is_some_and(|r| model::release_on_host(whole(r, op.items), plan.chunks));
            let forced = *cache.release_override.lock().unwrap_or_else(|p| p.into_inner());
            let release_on_host = plan.strategy == Strategy::Staged && forced.unwrap_or_else(rule);
            let mut report = cuda::run(g, &cache, &registered, &mut op, plan, measure, release_on_host)?;
            report.wall_seconds = start.elapsed().as_secs_f64();
            if let (Some(t), None) = (report.times, known) {
                if plan.strategy == Strategy::Serial && plan.chunks == 1 {
                    let warm = measured.is_some();
                    cache
                        .rates
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.clone(), Measured { rate: per_item(t, op.items), warm });
                }
            }
            report
        }
    };
    if profiling {
        let serial = cache.serial.lock().unwrap_or_else(|p| p.into_inner()).get(&key).copied().unwrap_or(0.0);
        // Untimed calls count their bytes and wall time only; on the host the whole call is the kernel.
        let (timed, t) = match (report.times, ctx.gpu()) {
            (Some(t), _) => (1, t),
            (None, None) => (1, Times { kernel: report.wall_seconds, ..Times::default() }),
            (None, Some(_)) => (0, Times::default()),
        };
        ctx.profile.record(
            op.name,
            &OpStats {
                calls: 1,
                timed_calls: timed,
                h2d_bytes: report.h2d_bytes,
                d2h_bytes: report.d2h_bytes,
                h2d_seconds: t.h2d + t.setup,
                d2h_seconds: t.d2h,
                kernel_seconds: t.kernel,
                wall_seconds: report.wall_seconds,
                overlapped_seconds: report.overlapped_seconds.unwrap_or(0.0),
                serial_seconds: serial * op.items as f64,
            },
        );
    }
    Ok(report)
}

/// Row panels move as 2-D copies with one segment per column, and those slow
/// down once a segment is under about 8 KiB (measured on the H100,
/// BENCHMARKS.md), which the overlap model does not know.
const MIN_ROW_SEGMENT_BYTES: usize = 8192;

/// Arrays that are not registered go through the host's staging copies,
/// which the model does not see; with them the pipelines measured fastest at
/// 2 to 4 streams and slower than one stream from 8 on (BENCHMARKS.md).
const MAX_STAGED_STREAMS: usize = 4;

/// The model's stream count for `op`, kept to the context's hardware queues
/// (beyond them one lane's kernel waits behind another lane's copy-in, issued
/// earlier: measured, the batched inner products saved nothing on 12 streams
/// and half as much on 16 with 8 queues, BENCHMARKS.md), to row
/// segments of at least MIN_ROW_SEGMENT_BYTES and to MAX_STAGED_STREAMS where
/// an array is staged.
fn choose(rate: Times, op: &Op, registered: &dyn Fn(*const f64, usize) -> bool, g: &crate::gpu::Gpu) -> usize {
    let t = whole(rate, op.items);
    let mut cap = op.items.max(1).min(g.info.hardware_queues);
    for (arg, layout) in &op.args {
        if let Layout::Rows { .. } = layout {
            cap = cap.min((op.items * 8 / MIN_ROW_SEGMENT_BYTES).max(1));
        }
        let (ptr, len) = arg.host();
        if *layout != Layout::Whole && !registered(ptr, len) {
            cap = cap.min(MAX_STAGED_STREAMS);
        }
    }
    model::best_streams(t, g.info.copy_engines.max(1) as usize, OVERHEAD).min(cap)
}

fn check_len(name: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(Error::size(format!("{name} has {got} elements; expected {want}")));
    }
    Ok(())
}

fn finite(scalars: &[(&str, f64)]) -> Result<()> {
    match scalars.iter().find(|(_, v)| !v.is_finite()) {
        Some((name, v)) => Err(Error::invalid(format!("{name} = {v}: must be finite"))),
        None => Ok(()),
    }
}

/// y = a x + b y on host arrays of n elements, pipelined through the device.
pub fn axpby(ctx: &Context, a: f64, x: &[f64], b: f64, y: &mut [f64], plan: Option<Plan>) -> Result<Report> {
    check_len("x", x.len(), y.len())?;
    finite(&[("a", a), ("b", b)])?;
    let n = y.len();
    run(
        ctx,
        Op {
            name: "axpby",
            kernel: Kernel::Axpby { a, b },
            items: n,
            args: vec![(Arg::In(x), Layout::Items(1)), (Arg::InOut(y), Layout::Items(1))],
        },
        plan,
    )
}

/// The report of a call with nothing to move (a zero size, as BLAS takes it).
fn nothing_to_move(plan: Option<Plan>) -> Report {
    Report {
        plan: plan.unwrap_or(Plan::SERIAL),
        wall_seconds: 0.0,
        times: None,
        overlapped_seconds: None,
        released_on_host: false,
        h2d_bytes: 0,
        d2h_bytes: 0,
    }
}

/// w = beta w on the host, w not read where beta = 0: what C = alpha A B +
/// beta C and y = alpha A x + beta y leave where the inner size is 0.
fn scaled_only(beta: f64, w: &mut [f64], plan: Option<Plan>) -> Report {
    w.iter_mut().for_each(|v| *v = if beta == 0.0 { 0.0 } else { beta * *v });
    nothing_to_move(plan)
}

/// out(j) = A(:, j) . B(:, j) for the ncols columns of two m x ncols host
/// matrices (column-major): the batched inner products of the concrete-dam
/// code (m = 0: every out(j) = 0).
pub fn column_dots(ctx: &Context, m: usize, a: &[f64], b: &[f64], out: &mut [f64], plan: Option<Plan>) -> Result<Report> {
    let ncols = out.len();
    check_len("a", a.len(), m * ncols)?;
    check_len("b", b.len(), m * ncols)?;
    if m == 0 {
        return Ok(scaled_only(0.0, out, plan));
    }
    let args = vec![(Arg::In(a), Layout::Items(m)), (Arg::In(b), Layout::Items(m)), (Arg::Out(out), Layout::Items(1))];
    run(ctx, Op { name: "column_dots", kernel: Kernel::ColumnDots { m }, items: ncols, args }, plan)
}

/// C = alpha A B + beta C for host matrices A (m x k), B (k x n), C (m x n),
/// column-major; A goes to the device once, B and C in column panels.
/// Zero sizes as BLAS takes them (k = 0: C = beta C).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    ctx: &Context,
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: &[f64],
    b: &[f64],
    beta: f64,
    c: &mut [f64],
    plan: Option<Plan>,
) -> Result<Report> {
    check_len("a", a.len(), m * k)?;
    check_len("b", b.len(), k * n)?;
    check_len("c", c.len(), m * n)?;
    finite(&[("alpha", alpha), ("beta", beta)])?;
    if m == 0 || n == 0 || k == 0 {
        return Ok(scaled_only(beta, c, plan));
    }
    let c_arg = if beta == 0.0 { Arg::Out(c) } else { Arg::InOut(c) };
    let args = vec![(Arg::In(a), Layout::Whole), (Arg::In(b), Layout::Items(k)), (c_arg, Layout::Items(m))];
    run(ctx, Op { name: "gemm", kernel: Kernel::Gemm { m, k, alpha, beta }, items: n, args }, plan)
}

/// y = alpha A x + beta y for a host m x n matrix A (column-major) and host
/// vectors; A moves in row panels, x once. Zero sizes as BLAS takes them
/// (n = 0: y = beta y).
#[allow(clippy::too_many_arguments)]
pub fn gemv(
    ctx: &Context,
    m: usize,
    n: usize,
    alpha: f64,
    a: &[f64],
    x: &[f64],
    beta: f64,
    y: &mut [f64],
    plan: Option<Plan>,
) -> Result<Report> {
    check_len("a", a.len(), m * n)?;
    check_len("x", x.len(), n)?;
    check_len("y", y.len(), m)?;
    finite(&[("alpha", alpha), ("beta", beta)])?;
    if m == 0 || n == 0 {
        return Ok(scaled_only(beta, y, plan));
    }
    let y_arg = if beta == 0.0 { Arg::Out(y) } else { Arg::InOut(y) };
    let args = vec![(Arg::In(a), Layout::Rows { ld: m, cols: n }), (Arg::In(x), Layout::Whole), (y_arg, Layout::Items(1))];
    run(ctx, Op { name: "gemv", kernel: Kernel::Gemv { n, alpha, beta }, items: m, args }, plan)
}

/// At = A^T for a host m x n matrix A (column-major; At is n x m), in column
/// panels of A, which land as row panels of At.
pub fn transpose(ctx: &Context, m: usize, n: usize, a: &[f64], at: &mut [f64], plan: Option<Plan>) -> Result<Report> {
    check_len("a", a.len(), m * n)?;
    check_len("at", at.len(), m * n)?;
    if m == 0 || n == 0 {
        return Ok(nothing_to_move(plan));
    }
    let args = vec![(Arg::In(a), Layout::Items(m)), (Arg::Out(at), Layout::Rows { ld: n, cols: m })];
    run(ctx, Op { name: "transpose", kernel: Kernel::Transpose { m }, items: n, args }, plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Request;

    /// Both staged orders forced (as `fegpu bench pipeline` does), on an
    /// operation whose output is also an input: y comes back right either way,
    /// registered and through the staging ring. On the CPU backend the order
    /// does not apply and the host loop answers.
    #[test]
    fn both_staged_orders_give_the_serial_axpby() {
        let ctx = Context::new(Request::Auto, 0).unwrap();
        let n = 1_000_003;
        let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1000) as f64 * 1e-3 - 0.5).collect();
        let y0: Vec<f64> = (0..n).map(|i| ((i * 104_729) % 997) as f64 * 1e-2).collect();
        let want: Vec<f64> = x.iter().zip(&y0).map(|(x, y)| 1.5f64.mul_add(*x, -0.25 * y)).collect();
        for register in [true, false] {
            let (mut x, mut y) = (x.clone(), y0.clone());
            if register {
                ctx.register_host(x.as_mut_ptr().cast(), 8 * n).unwrap();
                ctx.register_host(y.as_mut_ptr().cast(), 8 * n).unwrap();
            }
            for host in [true, false] {
                cache(&ctx).force_staged_order(Some(host));
                for (streams, chunks) in [(2usize, 2usize), (4, 9), (16, 16)] {
                    y.copy_from_slice(&y0);
                    let plan = Plan { strategy: Strategy::Staged, streams, chunks };
                    let report = axpby(&ctx, 1.5, &x, -0.25, &mut y, Some(plan)).unwrap();
                    assert_eq!(y, want, "host order {host}, streams {streams}, chunks {chunks}, registered {register}");
                    assert_eq!(report.released_on_host, host && ctx.gpu().is_some(), "the order forced");
                }
            }
            cache(&ctx).force_staged_order(None);
            if register {
                ctx.unregister_host(x.as_mut_ptr().cast()).unwrap();
                ctx.unregister_host(y.as_mut_ptr().cast()).unwrap();
            }
        }
    }
}
