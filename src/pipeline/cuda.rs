//! The device side of the pipelines: chunk buffers per stream, the
//! page-locked staging ring for unregistered host arrays, and the issue order
//! of each strategy. Kernels in `kernels/pipeline.cu`.

use super::model::Times;
use super::{Arg, Cache, Kernel, Layout, Op, Plan, Report, Strategy};
use crate::dense::{cuda::transpose_on, Variant};
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg, Lane, Mark, Pinned, Queue};

pub const SOURCE: &str = include_str!("../../kernels/pipeline.cu");

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    In,
    InOut,
    Out,
}

/// A caller's array as the executor sees it: borrowed for the whole call.
struct Raw {
    ptr: *mut f64,
    len: usize,
    layout: Layout,
    dir: Dir,
    /// Registered with the context: copied to and from directly.
    direct: bool,
}

impl Raw {
    fn reads(&self) -> bool {
        self.dir != Dir::Out && self.layout != Layout::Whole
    }
    fn writes(&self) -> bool {
        self.dir != Dir::In
    }
    /// Elements of a chunk of `w` items on the device.
    fn chunk_len(&self, w: usize) -> usize {
        match self.layout {
            Layout::Items(p) => w * p,
            Layout::Rows { cols, .. } => w * cols,
            Layout::Whole => self.len,
        }
    }
    /// Items [i0, i1) of a contiguous layout.
    ///
    /// # Safety
    /// The array is borrowed by the caller of `run` for the whole call, and
    /// no two live slices of one call overlap with a write.
    unsafe fn items<'a>(&self, i0: usize, i1: usize) -> &'a mut [f64] {
        debug_assert!(self.writes(), "only written arrays are reached mutably");
        let Layout::Items(p) = self.layout else { unreachable!("items of a row layout") };
        std::slice::from_raw_parts_mut(self.ptr.add(i0 * p), (i1 - i0) * p)
    }
    /// As `items`, for reading (every argument may be read).
    unsafe fn items_in<'a>(&self, i0: usize, i1: usize) -> &'a [f64] {
        let Layout::Items(p) = self.layout else { unreachable!("items of a row layout") };
        std::slice::from_raw_parts(self.ptr.add(i0 * p), (i1 - i0) * p)
    }
    /// Gathers rows [i0, i1) into `to` (compact, (i1 - i0) x cols), or scatters back.
    ///
    /// # Safety
    /// As `items`.
    unsafe fn rows(&self, i0: usize, i1: usize, to: &mut [f64], gather: bool) {
        let Layout::Rows { ld, cols } = self.layout else { unreachable!("rows of an item layout") };
        let w = i1 - i0;
        for c in 0..cols {
            let at = self.ptr.add(i0 + ld * c);
            if gather {
                to[w * c..w * (c + 1)].copy_from_slice(std::slice::from_raw_parts(at, w));
            } else {
                std::slice::from_raw_parts_mut(at, w).copy_from_slice(&to[w * c..w * (c + 1)]);
            }
        }
    }
}

/// Copies between the caller's pageable memory and the staging ring on
/// rayon's worker threads: one thread moves about 6 GB/s, a fraction of what
/// the copy engines take (BENCHMARKS.md).
fn parallel_copy(to: &mut [f64], from: &[f64]) {
    use rayon::prelude::*;
    const PIECE: usize = 1 << 16; // 512 KiB of f64 per task
    to.par_chunks_mut(PIECE).zip(from.par_chunks(PIECE)).for_each(|(t, f)| t.copy_from_slice(f));
}

/// One stream's share: its lane, a device buffer per argument, staging for
/// the unregistered ones, and the chunk whose staged outputs still have to be
/// copied out once the lane passes `Mark`.
struct Stream {
    lane: Lane,
    /// One per argument (a 1-element stand-in for whole arguments, which live in `Executor::whole`).
    buffers: Vec<DeviceBuffer<f64>>,
    staging: Vec<Option<Pinned<f64>>>,
    pending: Option<(usize, usize, Mark)>,
}

/// Marks around one chunk's phases (timed calls only).
struct Phases([Mark; 4]);

struct Executor<'r> {
    g: &'r Gpu,
    kernel: Kernel,
    raws: Vec<Raw>,
    /// The whole (unchunked) arguments, uploaded once, shared by the streams.
    whole: Vec<Option<DeviceBuffer<f64>>>,
    streams: Vec<Stream>,
    timed: bool,
    phases: Vec<Phases>,
}

impl Executor<'_> {
    /// Copies out the staged outputs of the stream's previous chunk (waiting for it).
    fn settle(&mut self, s: usize) -> Result<()> {
        let st = &mut self.streams[s];
        let Some((i0, i1, mark)) = st.pending.take() else { return Ok(()) };
        mark.synchronize()?;
        for (k, raw) in self.raws.iter().enumerate() {
            if let (true, Some(stage)) = (raw.writes(), st.staging[k].as_mut()) {
                let stage = &mut stage.as_mut_slice()?[..raw.chunk_len(i1 - i0)];
                // SAFETY: the caller's array, borrowed for the call.
                unsafe {
                    match raw.layout {
                        Layout::Rows { .. } => raw.rows(i0, i1, stage, false),
                        _ => parallel_copy(raw.items(i0, i1), stage),
                    }
                }
            }
        }
        Ok(())
    }

    fn copy_in(&mut self, s: usize, i0: usize, i1: usize) -> Result<()> {
        let st = &mut self.streams[s];
        for (k, raw) in self.raws.iter().enumerate().filter(|(_, r)| r.reads()) {
            let len = raw.chunk_len(i1 - i0);
            // SAFETY: registered memory is page-locked and the caller's borrow
            // outlives the call, which waits for every lane; staging is only
            // rewritten after `settle` saw the lane pass its last use.
            unsafe {
                match (st.staging[k].as_mut(), raw.layout) {
                    (None, Layout::Rows { ld, cols }) => {
                        st.lane.upload_2d(raw.ptr.add(i0), ld, i1 - i0, cols, &mut st.buffers[k])?
                    }
                    (None, _) => st.lane.upload(raw.items_in(i0, i1), &mut st.buffers[k], 0)?,
                    (Some(stage), layout) => {
                        let stage = &mut stage.as_mut_slice()?[..len];
                        match layout {
                            Layout::Rows { .. } => raw.rows(i0, i1, stage, true),
                            _ => parallel_copy(stage, raw.items_in(i0, i1)),
                        }
                        st.lane.upload(stage, &mut st.buffers[k], 0)?
                    }
                }
            }
        }
        Ok(())
    }

    fn compute(&mut self, s: usize, items: usize) -> Result<()> {
        let st = &mut self.streams[s];
        launch(self.g, &st.lane, self.kernel, items, &mut st.buffers, &self.whole)
    }

    fn copy_out(&mut self, s: usize, i0: usize, i1: usize) -> Result<()> {
        let st = &mut self.streams[s];
        for (k, raw) in self.raws.iter().enumerate().filter(|(_, r)| r.writes()) {
            let len = raw.chunk_len(i1 - i0);
            // SAFETY: as in copy_in; the destination is not read until the lane passes.
            unsafe {
                match (st.staging[k].as_mut(), raw.layout) {
                    (None, Layout::Rows { ld, cols }) => {
                        st.lane.download_2d(&st.buffers[k], raw.ptr.add(i0), ld, i1 - i0, cols)?
                    }
                    (None, _) => st.lane.download(&st.buffers[k], 0, raw.items(i0, i1))?,
                    (Some(stage), _) => st.lane.download(&st.buffers[k], 0, &mut stage.as_mut_slice()?[..len])?,
                }
            }
        }
        // Only staged outputs need the host to come back for them.
        if self.raws.iter().enumerate().any(|(k, r)| r.writes() && st.staging[k].is_some()) {
            st.pending = Some((i0, i1, st.lane.mark()?));
        }
        Ok(())
    }

    /// One phase of a chunk (0 copy-in, 1 kernel, 2 copy-out), with a timing
    /// mark after it (and one before the copy-in) when the call is timed.
    fn phase(&mut self, s: usize, i0: usize, i1: usize, phase: usize, marks: &mut Vec<Mark>) -> Result<()> {
        match phase {
            0 => {
                self.settle(s)?;
                if self.timed {
                    marks.push(self.streams[s].lane.mark()?);
                }
                self.copy_in(s, i0, i1)?
            }
            1 => self.compute(s, i1 - i0)?,
            _ => self.copy_out(s, i0, i1)?,
        }
        if self.timed {
            marks.push(self.streams[s].lane.mark()?);
        }
        Ok(())
    }
}

/// Runs `op` with `plan` (chunks already resolved); `registered` says whether
/// a host range may be copied directly; `release_on_host` (staged only):
/// the host queues each kernel once its chunk has landed
/// (`model::release_on_host`).
pub fn run(
    g: &Gpu,
    cache: &Cache,
    registered: &dyn Fn(*const f64, usize) -> bool,
    op: &mut Op,
    plan: Plan,
    timed: bool,
    release_on_host: bool,
) -> Result<Report> {
    // Only rounds of two or more chunks have a chunk the host can release.
    let release_on_host = release_on_host && plan.streams.min(plan.chunks).min(op.items) > 1;
    let items = op.items;
    let (mut h2d_bytes, mut d2h_bytes) = (0u64, 0u64);
    let raws: Vec<Raw> = op
        .args
        .iter_mut()
        .map(|(arg, layout)| {
            let (ptr, len, dir) = match arg {
                Arg::In(v) => (v.as_ptr() as *mut f64, v.len(), Dir::In),
                Arg::InOut(v) => (v.as_mut_ptr(), v.len(), Dir::InOut),
                Arg::Out(v) => (v.as_mut_ptr(), v.len(), Dir::Out),
            };
            if dir != Dir::Out {
                h2d_bytes += 8 * len as u64;
            }
            if dir != Dir::In {
                d2h_bytes += 8 * len as u64;
            }
            Raw { ptr, len, layout: *layout, dir, direct: registered(ptr, len) }
        })
        .collect();
    let report = |(times, overlapped_seconds)| Report {
        plan,
        wall_seconds: 0.0,
        times,
        overlapped_seconds,
        released_on_host: release_on_host,
        h2d_bytes,
        d2h_bytes,
    };
    if items == 0 {
        return Ok(report((None, None)));
    }
    let n_streams = if plan.strategy == Strategy::Serial { 1 } else { plan.streams.clamp(1, super::MAX_STREAMS) };
    let per_chunk = items.div_ceil(plan.chunks.max(1));
    let chunks = items.div_ceil(per_chunk);
    let n_streams = n_streams.min(chunks);
    // Buffers and staging for every stream, before anything is queued.
    let mut pool = std::mem::take(&mut *cache.staging.lock().unwrap_or_else(|p| p.into_inner()));
    let mut device_pool = std::mem::take(&mut *cache.buffers.lock().unwrap_or_else(|p| p.into_inner()));
    // The smallest kept buffer that holds `len`, or a new one.
    let mut buffer = |len: usize| -> Result<DeviceBuffer<f64>> {
        let fit = device_pool.iter().enumerate().filter(|(_, b)| b.len() >= len).min_by_key(|(_, b)| b.len()).map(|(i, _)| i);
        match fit {
            Some(i) => Ok(device_pool.swap_remove(i)),
            None => g.alloc::<f64>(len),
        }
    };
    let mut streams = Vec::with_capacity(n_streams);
    let mut whole = Vec::new();
    let setup_start = if timed { Some(g.mark()?) } else { None };
    for raw in &raws {
        whole.push(if raw.layout == Layout::Whole {
            let mut buf = buffer(raw.len.max(1))?;
            // SAFETY: an input argument, borrowed for the call.
            g.upload(unsafe { std::slice::from_raw_parts(raw.ptr, raw.len) }, &mut buf, 0)?;
            Some(buf)
        } else {
            None
        });
    }
    for lane in g.lanes(n_streams)? {
        let mut buffers = Vec::new();
        let mut staging = Vec::new();
        for raw in &raws {
            let len = if raw.layout == Layout::Whole { 1 } else { raw.chunk_len(per_chunk) };
            buffers.push(buffer(len.max(1))?);
            staging.push(if raw.direct || raw.layout == Layout::Whole {
                None
            } else {
                match pool.iter().position(|p| p.len() >= len) {
                    Some(i) => Some(pool.swap_remove(i)),
                    None => Some(g.pinned::<f64>(len)?),
                }
            });
        }
        streams.push(Stream { lane, buffers, staging, pending: None });
    }
    // The lanes must not touch the buffers before their (stream-ordered) allocation.
    g.synchronize("allocating pipeline buffers")?;
    let setup = match setup_start {
        Some(start) => start.seconds_until(&g.mark()?)?,
        None => 0.0,
    };
    let mut ex = Executor { g, kernel: op.kernel, raws, whole, streams, timed, phases: Vec::new() };
    let bounds = |c: usize| (c * per_chunk, ((c + 1) * per_chunk).min(items));
    let issue = |ex: &mut Executor| -> Result<()> {
        let mut marks: Vec<Vec<Mark>> = (0..chunks).map(|_| Vec::new()).collect();
        match plan.strategy {
            Strategy::Serial | Strategy::PerChunk => {
                for c in 0..chunks {
                    let (i0, i1) = bounds(c);
                    for phase in 0..3 {
                        ex.phase(c % n_streams, i0, i1, phase, &mut marks[c])?;
                    }
                }
            }
            Strategy::Staged => {
                for first in (0..chunks).step_by(n_streams) {
                    let round = first..(first + n_streams).min(chunks);
                    // A kernel queued behind its copy-in on the device pauses
                    // the other lanes' copy-ins when the copy lands (about
                    // 0.1 ms a call on the H100, BENCHMARKS.md); released from
                    // the host, each kernel (and its copy-out) is queued once
                    // its chunk has landed. The round's last one waits on the
                    // device: a host wait for it would hold back the next
                    // round's copy-ins.
                    // A timed call's mark after each copy-in serves; others record one.
                    let own_marks = release_on_host && !ex.timed;
                    let mut landed = Vec::with_capacity(round.len());
                    for c in round.clone() {
                        let (i0, i1) = bounds(c);
                        ex.phase(c % n_streams, i0, i1, 0, &mut marks[c])?;
                        landed.push(if own_marks { Some(ex.streams[c % n_streams].lane.mark()?) } else { None });
                    }
                    if release_on_host {
                        for c in round.clone() {
                            if c + 1 < round.end {
                                match &landed[c - first] {
                                    Some(mark) => mark.synchronize()?,
                                    None => marks[c][1].synchronize()?,
                                }
                            }
                            let (i0, i1) = bounds(c);
                            ex.phase(c % n_streams, i0, i1, 1, &mut marks[c])?;
                            ex.phase(c % n_streams, i0, i1, 2, &mut marks[c])?;
                        }
                    } else {
                        for phase in 1..3 {
                            for c in round.clone() {
                                let (i0, i1) = bounds(c);
                                ex.phase(c % n_streams, i0, i1, phase, &mut marks[c])?;
                            }
                        }
                    }
                }
            }
        }
        for m in marks {
            if let Ok([a, b, k, d]) = <[Mark; 4]>::try_from(m) {
                ex.phases.push(Phases([a, b, k, d]));
            }
        }
        Ok(())
    };
    let issued = issue(&mut ex);
    // Whatever happened, no lane may still be writing into the caller's arrays.
    let mut settled = Ok(());
    for s in 0..ex.streams.len() {
        let synced = ex.streams[s].lane.synchronize("pipeline");
        settled = settled.and(synced).and_then(|_| ex.settle(s));
    }
    let mut pool_back = cache.staging.lock().unwrap_or_else(|p| p.into_inner());
    pool_back.extend(pool);
    let mut buffers_back = cache.buffers.lock().unwrap_or_else(|p| p.into_inner());
    buffers_back.extend(device_pool);
    buffers_back.extend(ex.whole.drain(..).flatten());
    for st in ex.streams.iter_mut() {
        pool_back.extend(st.staging.iter_mut().filter_map(|s| s.take()));
        buffers_back.append(&mut st.buffers);
    }
    // Keep the largest few: enough for a call with every stream and argument.
    let keep = 4 * super::MAX_STREAMS;
    buffers_back.sort_by_key(|b| std::cmp::Reverse(b.len()));
    buffers_back.truncate(keep);
    pool_back.sort_by_key(|p| std::cmp::Reverse(p.len()));
    pool_back.truncate(keep);
    drop((pool_back, buffers_back));
    issued?;
    settled?;
    if !timed {
        return Ok(report((None, None)));
    }
    let (t, overlapped) = sum_phases(&ex.phases)?;
    Ok(report((Some(Times { setup, ..t }), Some(overlapped))))
}

/// The phase times summed over chunks, and the seconds the phases of
/// different kinds overlapped (`model::overlapped` of their intervals).
fn sum_phases(phases: &[Phases]) -> Result<(Times, f64)> {
    let mut t = Times::default();
    let mut intervals: [Vec<(f64, f64)>; 3] = Default::default();
    let Some(Phases([origin, ..])) = phases.first() else { return Ok((t, 0.0)) };
    for Phases(marks) in phases {
        // Every lane was synchronised before the phases are read.
        let at: Vec<f64> = marks.iter().map(|m| origin.seconds_to_done(m)).collect::<Result<_>>()?;
        for (kind, list) in intervals.iter_mut().enumerate() {
            list.push((at[kind], at[kind + 1]));
        }
        t.h2d += at[1] - at[0];
        t.kernel += at[2] - at[1];
        t.d2h += at[3] - at[2];
    }
    Ok((t, super::model::overlapped(&intervals)))
}

/// The chunk kernel of `k` on `items` items in the lane's buffers (argument
/// order as `Kernel` documents; whole arguments from `whole`). Public for
/// the benchmark's probes, which load a lane with the pipelines' own kernels.
pub fn launch(
    g: &Gpu,
    lane: &Lane,
    k: Kernel,
    items: usize,
    bufs: &mut [DeviceBuffer<f64>],
    whole: &[Option<DeviceBuffer<f64>>],
) -> Result<()> {
    let sms = g.info.multiprocessors.max(1) as usize;
    let shared = |i: usize| whole[i].as_ref().expect("a whole argument");
    match k {
        Kernel::Axpby { a, b } => {
            let f = g.kernel("pipeline", SOURCE, "chunk_axpby")?;
            let n = items as i64;
            let (x, y) = bufs.split_at_mut(1);
            let mut l = lane.launcher(&f);
            l.arg(&n).arg(&a).arg(&x[0]).arg(&b).arg(&mut y[0]);
            lane.launch("chunk_axpby", l, (items.div_ceil(256).min(16 * sms) as u32, 1, 1), (256, 1, 1), 0)
        }
        Kernel::ColumnDots { m } => {
            let f = g.kernel("pipeline", SOURCE, "chunk_column_dots")?;
            let (m64, n) = (m as i64, items as i64);
            let (ab, out) = bufs.split_at_mut(2);
            let mut l = lane.launcher(&f);
            l.arg(&m64).arg(&n).arg(&ab[0]).arg(&ab[1]).arg(&mut out[0]);
            lane.launch("chunk_column_dots", l, (items.min(32 * sms) as u32, 1, 1), (256, 1, 1), 0)
        }
        Kernel::Gemm { m, k, alpha, beta } => {
            let (b, c) = bufs.split_at_mut(2);
            lane.gemm(m, items, k, alpha, shared(0), m, &b[1], k, beta, &mut c[0], m)
        }
        Kernel::Gemv { n, alpha, beta } => {
            let (a, y) = bufs.split_at_mut(2);
            lane.gemv(items, n, alpha, &a[0], items, shared(1), beta, &mut y[0])
        }
        Kernel::Transpose { m } => {
            // The m x items panel becomes items x m: rows of the transpose.
            let (a, at) = bufs.split_at_mut(1);
            transpose_on(g, lane, Variant::Padded, None, m, items, &a[0], &mut at[0])
        }
    }
}
