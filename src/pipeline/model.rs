//! The overlap model: how long a pipelined call takes from the whole-array
//! copy-in, kernel and copy-out times, for each strategy, and the stream count
//! it predicts to be best.
//!
//! The work is cut into `chunks` equal chunks dealt round-robin to `streams`
//! streams. Each chunk is copy-in (h = H/chunks), kernel (k = K/chunks) and
//! copy-out (d = D/chunks), in order within its stream. The device runs one
//! queue per engine in issue order: host-to-device copies, kernels, and
//! device-to-host copies (sharing the host-to-device engine's queue when the
//! device has a single copy engine). An operation starts when both its
//! engine and its stream are free. The strategies differ only in issue order:
//!
//! - serial (version 1): one stream; h, k, d of each chunk in turn.
//! - per-chunk (version 2): h, k, d of chunk 0, then of chunk 1, ... across
//!   the streams.
//! - staged (version 3): for each round of `streams` chunks, all its copy-ins,
//!   then all its kernels, then all its copy-outs.
//!
//! With two or more copy engines and one round, versions 2 and 3 are the
//! three-stage pipeline, T = (H + K + D)/n + (n − 1)/n · max(H, K, D); with a
//! single engine version 2 makes each chunk's copy-in wait behind the previous
//! chunk's copy-out, which is why the seed found version 3 faster.
//! `overhead` is added to every operation (launch and copy set-up latency).

use super::Strategy;

/// Whole-array times in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Times {
    pub h2d: f64,
    pub kernel: f64,
    pub d2h: f64,
    /// Before the pipeline starts: uploading the arguments that are not
    /// chunked (gemm's A, gemv's x), on its own.
    pub setup: f64,
}

impl Times {
    pub fn total(&self) -> f64 {
        self.setup + self.h2d + self.kernel + self.d2h
    }
}

/// Predicted seconds of one call (copies in both directions at full speed together).
pub fn predict(strategy: Strategy, streams: usize, chunks: usize, t: Times, copy_engines: usize, overhead: f64) -> f64 {
    predict_phases(strategy, streams, chunks, t, copy_engines, [overhead; 3], 1.0)
}

/// As `predict`, with an overhead per operation of each phase (copy-in,
/// kernel, copy-out: a copy's set-up and a launch cost differently), and
/// copies in the two directions each running at `duplex` (0..1] of their own
/// speed while both are active: the link and host memory are shared
/// (measured by `fegpu bench pipeline`).
pub fn predict_phases(
    strategy: Strategy,
    streams: usize,
    chunks: usize,
    t: Times,
    copy_engines: usize,
    overhead: [f64; 3],
    duplex: f64,
) -> f64 {
    let streams = if strategy == Strategy::Serial { 1 } else { streams.clamp(1, chunks.max(1)) };
    let chunks = chunks.max(1);
    let dur = [t.h2d / chunks as f64 + overhead[0], t.kernel / chunks as f64 + overhead[1], t.d2h / chunks as f64 + overhead[2]];
    // Engines: 0 host-to-device, 1 kernels, 2 device-to-host (0 with one copy engine).
    let engine_of = |phase: usize| {
        if phase == 2 && copy_engines >= 2 {
            2
        } else if phase == 1 {
            1
        } else {
            0
        }
    };
    // (stream, phase) in issue order.
    let mut ops: Vec<(usize, usize)> = Vec::with_capacity(3 * chunks);
    match strategy {
        Strategy::Serial | Strategy::PerChunk => (0..chunks).for_each(|c| (0..3).for_each(|p| ops.push((c % streams, p)))),
        Strategy::Staged => {
            for first in (0..chunks).step_by(streams) {
                for p in 0..3 {
                    for c in first..(first + streams).min(chunks) {
                        ops.push((c % streams, p));
                    }
                }
            }
        }
    }
    // Each engine runs its operations in issue order; an operation also waits
    // for the previous one of its stream. Time advances from one completion to
    // the next, copy rates shared while both directions are busy.
    let queues: Vec<Vec<usize>> = (0..3).map(|e| (0..ops.len()).filter(|&i| engine_of(ops[i].1) == e).collect()).collect();
    let mut previous_in_stream = vec![None; ops.len()];
    let mut last = vec![None; streams];
    for (i, &(s, _)) in ops.iter().enumerate() {
        previous_in_stream[i] = last[s];
        last[s] = Some(i);
    }
    let mut head = [0usize; 3];
    let mut running: [Option<usize>; 3] = [None; 3];
    let mut remaining: Vec<f64> = ops.iter().map(|&(_, p)| dur[p]).collect();
    let mut done = vec![false; ops.len()];
    let (mut now, mut finished) = (t.setup, 0);
    while finished < ops.len() {
        for e in 0..3 {
            if running[e].is_none() && head[e] < queues[e].len() {
                let i = queues[e][head[e]];
                if previous_in_stream[i].is_none_or(|j| done[j]) {
                    running[e] = Some(i);
                    head[e] += 1;
                }
            }
        }
        let both_copying = copy_engines >= 2 && running[0].is_some() && running[2].is_some();
        let rate = |e: usize| if both_copying && e != 1 { duplex } else { 1.0 };
        let step = (0..3).filter_map(|e| running[e].map(|i| remaining[i] / rate(e))).fold(f64::INFINITY, f64::min);
        now += step;
        for e in 0..3 {
            if let Some(i) = running[e] {
                remaining[i] -= step * rate(e);
                if remaining[i] <= 1e-15 * (1.0 + now) {
                    done[i] = true;
                    running[e] = None;
                    finished += 1;
                }
            }
        }
    }
    now
}

/// Per chunk, the time the kernel engine must have to spare before the
/// staged strategy queues kernels from the host (`release_on_host`), so that
/// the host's latency from a chunk landing to its kernel being queued (an
/// event wait and a launch) stays off the kernel engine's chain. It separates
/// what was measured (BENCHMARKS.md): gemm at 8-16 streams, 17-34 us to
/// spare per chunk, lost 0.5-0.7 ms queued from the host; axpby and the
/// inner products, 72 us and more, gained.
pub const HOST_RELEASE_SLACK: f64 = 50e-6;

/// The largest copy-out, as a share of the copy-in, with which the staged
/// strategy queues kernels from the host (`release_on_host`). Measured on
/// the H100 in both orders, same run (BENCHMARKS.md): the host order gained
/// where the copy-out is under 1% of the copy-in (the inner products, gemv:
/// up to 0.13 and 0.42 ms) and gained nothing or lost where it is 45% or
/// more (axpby 4e6: nothing; axpby 1e8: 0.25-0.62 ms; gemm: 0.9-1.7 ms).
pub const HOST_RELEASE_MAX_COPY_OUT: f64 = 0.1;

/// Whether the staged strategy should queue each chunk's kernel from the
/// host once the chunk has landed, rather than queue it on the device behind
/// the copy-in: a device-side wait pauses the other lanes' copy-ins as the
/// copy lands (measured on the H100, BENCHMARKS.md), which matters where the
/// kernels are short beside the copies and there is little to copy out;
/// where the kernels are not short, the host's latency would hold them back
/// (gemm), and where the copy-outs are large the host order measured slower.
pub fn release_on_host(t: Times, chunks: usize) -> bool {
    t.d2h <= HOST_RELEASE_MAX_COPY_OUT * t.h2d && (t.h2d - t.kernel) / chunks.max(1) as f64 >= HOST_RELEASE_SLACK
}

/// The stream count (1..=16, one chunk per stream) the model predicts fastest
/// for the staged strategy; ties go to fewer streams.
pub fn best_streams(t: Times, copy_engines: usize, overhead: f64) -> usize {
    let mut best = (f64::INFINITY, 1);
    for n in 1..=16 {
        let p = predict(Strategy::Staged, n, n, t, copy_engines, overhead);
        if p < best.0 * (1.0 - 1e-9) {
            best = (p, n);
        }
    }
    best.1
}

/// Length of the union of `intervals` (start, end), in any order.
fn union_length(intervals: &[(f64, f64)]) -> f64 {
    let mut v = intervals.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut reach) = (0.0, f64::NEG_INFINITY);
    for (start, end) in v {
        let start = start.max(reach);
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total
}

/// The time a call's activities overlapped: the busy time of each kind
/// (copy-in, kernel, copy-out; the union of its intervals) summed, minus the
/// busy time of all together, from one call's own events. A chunk's kernel
/// phase runs from the end of its copy-in to the end of its kernel, so launch
/// gaps count as kernel time, and copies of the two directions that slow each
/// other down count as overlapped: an upper bound of the time saved.
pub fn overlapped(kinds: &[Vec<(f64, f64)>]) -> f64 {
    let all: Vec<(f64, f64)> = kinds.iter().flatten().copied().collect();
    kinds.iter().map(|k| union_length(k)).sum::<f64>() - union_length(&all)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Times = Times { h2d: 4.0, kernel: 2.0, d2h: 1.0, setup: 0.0 };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn serial_is_the_sum_whatever_the_chunking() {
        for chunks in [1, 3, 16] {
            assert!(close(predict(Strategy::Serial, 8, chunks, T, 2, 0.0), 7.0));
        }
    }

    #[test]
    fn staged_with_two_engines_is_the_three_stage_pipeline() {
        for n in 1..=16 {
            let want = T.total() / n as f64 + (n as f64 - 1.0) / n as f64 * 4.0;
            assert!(close(predict(Strategy::Staged, n, n, T, 2, 0.0), want), "n = {n}");
            assert!(close(predict(Strategy::PerChunk, n, n, T, 2, 0.0), want), "n = {n}");
        }
    }

    #[test]
    fn per_chunk_with_one_copy_engine_waits_behind_copy_outs() {
        // Copies share one queue: h0 d0 h1 d1 ... so the copies alone take H + D,
        // and the last kernel and copy-out follow the last copy-in.
        let n = 4;
        let v2 = predict(Strategy::PerChunk, n, n, T, 1, 0.0);
        let v3 = predict(Strategy::Staged, n, n, T, 1, 0.0);
        // Staged: the four copy-ins (0..4), then the copy-outs queued behind them on
        // the shared engine (4..5); the kernels hide under the copies: H + D.
        assert!(close(v3, 5.0), "{v3}");
        // Per-chunk: h0 (1) k0 (to 1.5) d0 waits for k0 then runs (1.5..1.75); h1 issued
        // after d0 in the shared queue (1.75..2.75); and so on: 4 x (1 + 0.5 + 0.25) = 7,
        // as slow as serial: the copy engine alternates and nothing overlaps.
        assert!(close(v2, 7.0), "{v2}");
        assert!(v3 < v2);
    }

    #[test]
    fn overhead_makes_more_streams_cost() {
        assert_eq!(best_streams(T, 2, 0.0), 16);
        // With 0.2 s per operation the pipeline stops paying early.
        let n = best_streams(T, 2, 0.2);
        assert!((2..16).contains(&n), "{n}");
        // A kernel-free transfer gains nothing from streams beyond splitting the
        // two directions.
        let copy_only = Times { h2d: 1.0, kernel: 0.0, d2h: 1.0, setup: 0.0 };
        assert!(predict(Strategy::Staged, 16, 16, copy_only, 2, 0.0) >= 1.0);
    }

    #[test]
    fn shared_copy_bandwidth_slows_the_overlapped_copies() {
        let copy_only = Times { h2d: 1.0, kernel: 0.0, d2h: 1.0, setup: 0.0 };
        // At half speed each while both run, overlapping two directions gains nothing.
        let t = predict_phases(Strategy::Staged, 16, 16, copy_only, 2, [0.0; 3], 0.5);
        assert!((t - 2.0).abs() < 1e-9, "{t}");
        // At full speed the copy-out of one chunk hides under the next copy-in.
        assert!(close(predict(Strategy::Staged, 16, 16, copy_only, 2, 0.0), 1.0 + 1.0 / 16.0));
        // In between, in between.
        let mid = predict_phases(Strategy::Staged, 16, 16, copy_only, 2, [0.0; 3], 0.75);
        assert!(mid > 1.0625 && mid < 2.0, "{mid}");
    }

    #[test]
    fn setup_comes_before_everything_and_hides_nothing() {
        let with = Times { setup: 3.0, ..T };
        for n in [1, 4, 16] {
            assert!(close(predict(Strategy::Staged, n, n, with, 2, 0.0), 3.0 + predict(Strategy::Staged, n, n, T, 2, 0.0)));
        }
    }

    #[test]
    fn host_release_only_where_the_kernels_leave_time_to_spare() {
        // The inner products: 0.5 ms of kernel beside 29 ms of copy-in.
        let dots = Times { h2d: 29e-3, kernel: 0.5e-3, d2h: 0.03e-3, setup: 0.0 };
        assert!(release_on_host(dots, 16));
        // gemm: kernels nearly as long as the copy-ins.
        let gemm = Times { h2d: 2.5e-3, kernel: 2.2e-3, d2h: 0.1e-3, setup: 2.5e-3 };
        assert!(!release_on_host(gemm, 8));
        // A small array cut fine: 20 us of copy per chunk.
        let small = Times { h2d: 0.32e-3, kernel: 0.01e-3, d2h: 0.02e-3, setup: 0.0 };
        assert!(release_on_host(small, 2) && !release_on_host(small, 16));
    }

    #[test]
    fn host_release_only_where_little_is_copied_out() {
        // gemv: a vector out beside a matrix in.
        let gemv = Times { h2d: 2.59e-3, kernel: 0.06e-3, d2h: 0.01e-3, setup: 0.0 };
        assert!(release_on_host(gemv, 8));
        // axpby 1e8: kernels short, but y comes back (half the copy-in).
        let axpby = Times { h2d: 29.3e-3, kernel: 0.83e-3, d2h: 14.5e-3, setup: 0.0 };
        assert!(!release_on_host(axpby, 8));
        // At the bound, and just over it.
        let at = Times { d2h: HOST_RELEASE_MAX_COPY_OUT * gemv.h2d, ..gemv };
        assert!(release_on_host(at, 8));
        assert!(!release_on_host(Times { d2h: at.d2h * 1.01, ..at }, 8));
    }

    #[test]
    fn overlap_of_intervals() {
        // Copies 0..4 and 4..8, kernels 3..5 and 8..9: the kernel 3..5 overlaps the copies for 2 s.
        let copies = vec![(4.0, 8.0), (0.0, 4.0)];
        let kernels = vec![(8.0, 9.0), (3.0, 5.0)];
        assert!(close(overlapped(&[copies.clone(), kernels, vec![]]), 2.0));
        // Nothing overlaps in a serial call; overlapping copies of one kind are not an overlap.
        assert!(close(overlapped(&[vec![(0.0, 2.0), (1.0, 3.0)], vec![(3.0, 4.0)], vec![(4.0, 4.5)]]), 0.0));
        assert!(close(union_length(&copies), 8.0));
        assert!(close(union_length(&[(0.0, 1.0), (0.2, 0.5), (2.0, 3.0)]), 2.0));
    }

    #[test]
    fn per_phase_overheads_on_the_critical_path_only_stay_unhidden() {
        // Copy-in bound: overheads of kernels and copy-outs hide behind the
        // next copy-in, those of copy-ins do not.
        let t = Times { h2d: 8.0, kernel: 1.0, d2h: 0.5, setup: 0.0 };
        let base = predict_phases(Strategy::Staged, 8, 8, t, 2, [0.0; 3], 1.0);
        assert!(close(predict_phases(Strategy::Staged, 8, 8, t, 2, [0.1, 0.0, 0.0], 1.0), base + 0.8));
        assert!(close(predict_phases(Strategy::Staged, 8, 8, t, 2, [0.0, 0.01, 0.01], 1.0), base + 0.02));
        assert!(close(predict_phases(Strategy::Serial, 1, 8, t, 2, [0.1, 0.01, 0.01], 1.0), 9.5 + 0.8 + 0.16));
    }
}
