"""Issue orders for the batched inner products (1000 x 1e5, registered host
memory, n chunks), timed on the device machine with CuPy, to find where the
staged pipeline loses against the overlap model:

    CUDA_DEVICE_MAX_CONNECTIONS=16 python3 peers/pipeline_probe.py [chunks] [trace|parts|ab|beside|axpby|duplex]

trace (default): each issue order called alternately with version 1 in the
same chunks (median of the pairs' differences = time saved), and one call of
each traced with events after every copy-in, kernel and copy-out.
parts: each part of a staged call (kernels, copy-outs) against the copy-ins
alone. ab: kernels queued by the host as each chunk lands against the
device-side staged order, 41 pairs. beside: a 200 MB upload alone and
beside the kernel, by the kernel's grid width, on random and zero data.
axpby: where a copy-out as large as half the copy-in comes back (axpby 1e8,
x and y in, y out), the device order against the host order and against
kernels queued by the host with the copy-outs queued after them, in pairs,
and one traced call of each. duplex: each direction's share of its speed
while the other runs (a 256 MiB copy one way wholly inside two the other
way), against the one symmetric share `fegpu bench pipeline` gives the model.
Results: results/pipeline-probe-*.
"""
import sys
import time
import statistics
import numpy as np
import cupy as cp

rt = cp.cuda.runtime
M, NCOLS = 1000, 100_000
N = int(sys.argv[1]) if len(sys.argv) > 1 else 8
W = NCOLS // N

SRC = r'''
extern "C" __global__ void dots(long m, long n, const double* a, const double* b, double* out) {
  __shared__ double sh[256];
  for (long j = blockIdx.x; j < n; j += gridDim.x) {
    double s = 0;
    for (long i = threadIdx.x; i < m; i += blockDim.x) s += a[j * m + i] * b[j * m + i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) { if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w]; __syncthreads(); }
    if (threadIdx.x == 0) out[j] = sh[0];
    __syncthreads();
  }
}
'''
dots = cp.RawKernel(SRC, "dots")
MODE = sys.argv[2] if len(sys.argv) > 2 else "trace"


def beside():
    """A 200 MB upload alone and beside the kernel, by the kernel's grid width."""
    m, w = 1000, 12500          # one chunk of 8: 100 MB per operand
    host = np.arange(2 * m * w, dtype=np.float64) % 7
    rt.hostRegister(host.ctypes.data, host.nbytes, 0)
    dev = cp.empty(2 * m * w)
    for fill in ["random", "zeros"]:
        ka = cp.random.random(m * w) if fill == "random" else cp.zeros(m * w)
        kb = cp.random.random(m * w) if fill == "random" else cp.zeros(m * w)
        ko = cp.empty(w)
        sc, sk = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)

        def kernel(grid):
            with sk:
                dots((grid,), (256,), (np.int64(m), np.int64(w), ka, kb, ko))

        def copy_ms(grid, launches):
            cp.cuda.Device().synchronize()
            for _ in range(launches):
                kernel(grid)
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(sc)
            rt.memcpyAsync(dev.data.ptr, host.ctypes.data, host.nbytes, rt.memcpyHostToDevice, sc.ptr)
            e1.record(sc)
            cp.cuda.Device().synchronize()
            return cp.cuda.get_elapsed_time(e0, e1)

        def kernel_ms(grid):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(sk)
            for _ in range(10):
                kernel(grid)
            e1.record(sk)
            e1.synchronize()
            return cp.cuda.get_elapsed_time(e0, e1) / 10

        alone = statistics.median([copy_ms(1, 0) for _ in range(9)])
        print(f"{fill}: copy of {host.nbytes / 1e6:.0f} MB alone {alone:.3f} ms ({host.nbytes / alone / 1e6:.1f} GB/s)")
        for grid in [16, 33, 66, 132, 264, 528, 1056, 4224]:
            k = kernel_ms(grid)
            launches = int(2 * alone / k) + 1   # the kernel outlasts the copy
            loaded = statistics.median([copy_ms(grid, launches) for _ in range(9)])
            print(f"  grid {grid:5d}: kernel {k * 1e3:7.1f} us ({2 * m * w * 8 / k / 1e6:6.0f} GB/s); copy beside it {loaded:.3f} ms = {100 * alone / loaded:.1f}% of its rate alone")


if MODE == "beside":
    beside()
    sys.exit(0)


def duplex():
    n = 1 << 25
    up_host, down_host = cp.cuda.alloc_pinned_memory(8 * n), cp.cuda.alloc_pinned_memory(8 * n)
    up_dev, down_dev = cp.empty(n), cp.zeros(n)
    lanes = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]

    def copy(up, lane):
        if up:
            rt.memcpyAsync(up_dev.data.ptr, up_host.ptr, 8 * n, rt.memcpyHostToDevice, lane.ptr)
        else:
            rt.memcpyAsync(down_host.ptr, down_dev.data.ptr, 8 * n, rt.memcpyDeviceToHost, lane.ptr)

    windows = []

    def timed(up, others):
        # One copy on lane 0, `others` copies the other way on lane 1 queued
        # first, so it runs wholly beside them; `windows` keeps where each ran.
        f0, f1 = cp.cuda.Event(), cp.cuda.Event()
        f0.record(lanes[1])
        queued = time.perf_counter()
        for _ in range(others):
            copy(not up, lanes[1])
        queued = time.perf_counter() - queued
        f1.record(lanes[1])
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(lanes[0])
        copy(up, lanes[0])
        e1.record(lanes[0])
        cp.cuda.Device().synchronize()
        if others:
            windows.append((up, [round(cp.cuda.get_elapsed_time(f0, e), 2) for e in (e0, e1, f1)] + [round(queued * 1e3, 2)]))
        return cp.cuda.get_elapsed_time(e0, e1)

    shares = {True: [], False: []}
    symmetric = []
    for _ in range(9):
        alone = {up: timed(up, 0) for up in (True, False)}
        for up in (True, False):
            shares[up].append(alone[up] / timed(up, 2))
        t = time.perf_counter()
        copy(True, lanes[0])
        copy(False, lanes[1])
        cp.cuda.Device().synchronize()
        symmetric.append(max(alone.values()) / ((time.perf_counter() - t) * 1e3))
    med = statistics.median
    print(f"256 MiB pinned: H2D {8 * n / med([timed(True, 0) for _ in range(5)]) / 1e6:.1f} GB/s, D2H {8 * n / med([timed(False, 0) for _ in range(5)]) / 1e6:.1f} GB/s alone")
    print(f"while the other direction runs, median of 9: H2D keeps {100 * med(shares[True]):.0f}% (range {100 * min(shares[True]):.0f}-{100 * max(shares[True]):.0f}), "
          f"D2H keeps {100 * med(shares[False]):.0f}% (range {100 * min(shares[False]):.0f}-{100 * max(shares[False]):.0f}); "
          f"the symmetric share (both at once, as fegpu bench pipeline): {100 * med(symmetric):.0f}%")
    for up, (start, end, others_end, queued) in windows[-2:]:
        print(f"  {'H2D' if up else 'D2H'} beside the other way: ran {start}-{end} ms after the other way's copies were queued "
              f"(queuing them held the host {queued} ms); they ended at {others_end} ms")


if MODE == "duplex":
    duplex()
    sys.exit(0)


def axpby_orders():
    n = 100_000_000
    w = n // N
    x = np.arange(n, dtype=np.float64) % 1000 * 1e-3
    y = np.ones(n)
    for h in (x, y):
        rt.hostRegister(h.ctypes.data, h.nbytes, 0)
    ss = [cp.cuda.Stream(non_blocking=True) for _ in range(N)]
    dx, dy = [cp.empty(w) for _ in range(N)], [cp.empty(w) for _ in range(N)]
    ker = cp.ElementwiseKernel("float64 x", "float64 y", "y = fma(1.0001, x, 0.5 * y)", "probe_axpby")

    def mark(trace, k, what):
        # An event after the operation: timed when traced (the copy-ins' also
        # tell the host order when a chunk has landed).
        e = cp.cuda.Event(disable_timing=trace is None)
        e.record(ss[k])
        if trace is not None:
            trace.append((what, e))
        return e

    def copy_in(k, trace):
        rt.memcpyAsync(dx[k].data.ptr, x.ctypes.data + 8 * k * w, 8 * w, rt.memcpyHostToDevice, ss[k].ptr)
        rt.memcpyAsync(dy[k].data.ptr, y.ctypes.data + 8 * k * w, 8 * w, rt.memcpyHostToDevice, ss[k].ptr)
        return mark(trace, k, "in")

    def kernel(k, trace):
        with ss[k]:
            ker(dx[k], dy[k])
        if trace is not None:
            mark(trace, k, "k")

    def copy_out(k, trace):
        rt.memcpyAsync(y.ctypes.data + 8 * k * w, dy[k].data.ptr, 8 * w, rt.memcpyDeviceToHost, ss[k].ptr)
        if trace is not None:
            mark(trace, k, "out")

    def device_order(trace=None):
        for k in range(N):
            copy_in(k, trace)
        for k in range(N):
            kernel(k, trace)
        for k in range(N):
            copy_out(k, trace)

    def host_order(trace=None, outs_after=False):
        landed = [copy_in(k, trace) for k in range(N)]
        for k in range(N):
            if k + 1 < N:
                landed[k].synchronize()
            kernel(k, trace)
            if not outs_after:
                copy_out(k, trace)
        if outs_after:
            for k in range(N):
                copy_out(k, trace)

    def traced(f):
        trace = trace_of(f, ss)
        return {kind: [round(t, 3) for what, t in trace if what == kind] for kind in ("in", "k", "out")}

    call(device_order)
    variants = [("host order", host_order), ("host kernels, copy-outs after", lambda trace=None: host_order(trace, True))]
    for name, f in variants:
        t, sv, sd = paired(f, device_order, reps=21)
        print(f"axpby 1e8, {N} chunks: {name:<30} {t * 1e3:8.3f} ms, saved {sv * 1e3:7.3f} ms (sd {sd * 1e3:.3f}) against the device order")
    for name, f in [("device order", device_order)] + variants:
        tr = traced(f)
        print(f"  trace {name}: copy-ins done {tr['in']}; kernels done {tr['k']}; copy-outs done {tr['out']}")

a = np.arange(M * NCOLS, dtype=np.float64) % 7
b = np.arange(M * NCOLS, dtype=np.float64) % 5 * 0.5
out = np.zeros(NCOLS)
for h in (a, b, out):
    rt.hostRegister(h.ctypes.data, h.nbytes, 0)

streams = [cp.cuda.Stream(non_blocking=True) for _ in range(N + 1)]
copy_stream = streams[N]
bufs = [(cp.empty(M * W), cp.empty(M * W), cp.empty(W)) for _ in range(N)]
sms = cp.cuda.Device().attributes["MultiProcessorCount"]


def h2d(dev, host, off, count, s):
    rt.memcpyAsync(dev.data.ptr, host.ctypes.data + 8 * off, 8 * count, rt.memcpyHostToDevice, s.ptr)


def d2h(host, off, dev, count, s):
    rt.memcpyAsync(host.ctypes.data + 8 * off, dev.data.ptr, 8 * count, rt.memcpyDeviceToHost, s.ptr)


def kernel(k, lane, s):
    da, db, do = bufs[lane]
    with s:
        dots((min(W, 32 * sms),), (256,), (np.int64(M), np.int64(W), da, db, do))


def copy_in(k, lane, s):
    h2d(bufs[lane][0], a, k * W * M, W * M, s)
    h2d(bufs[lane][1], b, k * W * M, W * M, s)


def copy_out(k, lane, s):
    d2h(out, k * W, bufs[lane][2], W, s)


def mark(trace, s, what):
    if trace is not None:
        e = cp.cuda.Event()
        e.record(s)
        trace.append((what, e))


def v1(trace=None, d2h_on=True):
    s = streams[0]
    for k in range(N):
        copy_in(k, 0, s); mark(trace, s, f"in{k}")
        kernel(k, 0, s); mark(trace, s, f"k{k}")
        if d2h_on:
            copy_out(k, 0, s); mark(trace, s, f"out{k}")


def staged(trace=None, d2h_on=True, kernels=True):
    for k in range(N):
        copy_in(k, k, streams[k]); mark(trace, streams[k], f"in{k}")
    if kernels:
        for k in range(N):
            kernel(k, k, streams[k]); mark(trace, streams[k], f"k{k}")
    if d2h_on:
        for k in range(N):
            copy_out(k, k, streams[k]); mark(trace, streams[k], f"out{k}")


def copy_lane(trace=None):
    evs = []
    for k in range(N):
        copy_in(k, k, copy_stream)
        e = cp.cuda.Event(disable_timing=True)
        e.record(copy_stream)
        evs.append(e)
        mark(trace, copy_stream, f"in{k}")
    for k in range(N):
        streams[k].wait_event(evs[k])
        kernel(k, k, streams[k]); mark(trace, streams[k], f"k{k}")
    for k in range(N):
        copy_out(k, k, streams[k]); mark(trace, streams[k], f"out{k}")


def per_chunk(trace=None):
    for k in range(N):
        s = streams[k]
        copy_in(k, k, s); mark(trace, s, f"in{k}")
        kernel(k, k, s); mark(trace, s, f"k{k}")
        copy_out(k, k, s); mark(trace, s, f"out{k}")


def copies_only_one():
    for k in range(N):
        copy_in(k, 0, streams[0])


def copies_only_dealt():
    for k in range(N):
        copy_in(k, k, streams[k])


def call(f):
    t = time.perf_counter()
    f()
    cp.cuda.Device().synchronize()
    return time.perf_counter() - t


def paired(f, base=v1, reps=15):
    call(f)
    ts, saved = [], []
    for _ in range(reps):
        tb = call(base)
        tf = call(f)
        ts.append(tf)
        saved.append(tb - tf)
    return statistics.median(ts), statistics.median(saved), statistics.pstdev(saved)


def trace_of(f, lanes=None):
    """(what, ms from a common start) of each mark `f` records on `lanes`."""
    lanes = lanes or streams
    trace = []
    s0 = cp.cuda.Event()
    s0.record(lanes[0])
    for s in lanes[1:]:
        s.wait_event(s0)
    f(trace)
    cp.cuda.Device().synchronize()
    return [(w, cp.cuda.get_elapsed_time(s0, e)) for w, e in trace]


whole_out = cp.empty(NCOLS)


def host_released(d2h_on=True):
    # The host waits for each chunk's copy-in, then queues its kernel and
    # copy-out: no semaphore between a copy and a kernel on the device.
    evs = []
    for k in range(N):
        copy_in(k, k, streams[k])
        e = cp.cuda.Event(disable_timing=True)
        e.record(streams[k])
        evs.append(e)
    for k in range(N):
        evs[k].synchronize()
        kernel(k, k, streams[k])
        if d2h_on:
            copy_out(k, k, streams[k])


def merged_out():
    # Kernels write into one device output; one copy-out after the last.
    for k in range(N):
        copy_in(k, k, streams[k])
    done = []
    for k in range(N):
        da, db, _ = bufs[k]
        with streams[k]:
            dots((min(W, 32 * sms),), (256,), (np.int64(M), np.int64(W), da, db, whole_out[k * W:(k + 1) * W]))
        e = cp.cuda.Event(disable_timing=True)
        e.record(streams[k])
        done.append(e)
    for e in done[:-1]:
        streams[N - 1].wait_event(e)
    d2h(out, 0, whole_out, NCOLS, streams[N - 1])


if MODE == "axpby":
    axpby_orders()
    sys.exit(0)
if MODE == "ab":
    # Kernels released by the host against the device-side staged order.
    call(staged)
    for name, f, base in [("host-released vs staged", host_released, staged), ("host-released vs version 1", host_released, v1), ("staged vs version 1", staged, v1)]:
        t, sv, sd = paired(f, base, reps=41)
        print(f"chunks {N}: {name:<28} {t * 1e3:8.3f} ms, saved {sv * 1e3:7.3f} ms against the other")
    sys.exit(0)
if MODE == "parts":
    # Which part of a staged call slows its copy-ins: each variant against the
    # copy-ins alone (dealt over the streams), alternately, 21 pairs.
    call(staged)
    for name, f in [
        ("host-released kernels", lambda: host_released(False)),
        ("host-released kernels + copy-outs", host_released),
        ("kernels + one merged copy-out", merged_out),
        ("copy-ins + kernels", lambda: staged(d2h_on=False)),
        ("copy-ins + copy-outs", lambda: staged(kernels=False)),
        ("copy-ins + kernels + copy-outs", staged),
        ("copy lane: + kernels + copy-outs", copy_lane),
        ("per-chunk", per_chunk),
        ("copy-ins on one stream", copies_only_one),
    ]:
        t, sv, sd = paired(f, copies_only_dealt, reps=21)
        print(f"chunks {N}: {name:<34} {t * 1e3:8.3f} ms, {-sv * 1e3:7.3f} ms longer than the copy-ins alone")
    sys.exit(0)

# The kernel alone, all chunks on one stream from device memory.
call(v1)
s = streams[0]
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
e0.record(s)
for k in range(N):
    kernel(k, 0, s)
e1.record(s)
e1.synchronize()
K = cp.cuda.get_elapsed_time(e0, e1)
print(f"chunks {N}: kernels alone {K:.3f} ms in total ({K / N * 1e3:.1f} us each)")
print(f"version 1: {statistics.median([call(v1) for _ in range(7)]) * 1e3:.2f} ms; copies alone on one stream {statistics.median([call(copies_only_one) for _ in range(7)]) * 1e3:.2f} ms, dealt over {N} streams {statistics.median([call(copies_only_dealt) for _ in range(7)]) * 1e3:.2f} ms")
print(f"ideal saving of a staged call (kernels of {N - 1} chunks): {K * (N - 1) / N:.3f} ms, plus their gaps")
for name, f, base in [
    ("staged", staged, v1),
    ("per-chunk", per_chunk, v1),
    ("copy lane + staged kernels", copy_lane, v1),
    ("staged, no copy-out, vs v1 no copy-out", lambda: staged(d2h_on=False), lambda: v1(d2h_on=False)),
    ("staged copies only vs staged", lambda: staged(d2h_on=False, kernels=False), staged),
]:
    t, sv, sd = paired(f, base)
    print(f"{name:<40} {t * 1e3:8.2f} ms  saved {sv * 1e3:7.3f} ms (sd {sd * 1e3:.3f})")
for name, f in [("v1", v1), ("staged", staged), ("copy lane", copy_lane)]:
    tr = trace_of(f)
    ins = sorted(t for w, t in tr if w.startswith("in"))
    ks = sorted(t for w, t in tr if w.startswith("k"))
    outs = sorted(t for w, t in tr if w.startswith("out"))
    gaps = [round(y - x, 3) for x, y in zip(ins, ins[1:])]
    print(f"trace {name}: copy-ins done at {[round(t, 3) for t in ins]}")
    print(f"   spacing {gaps}; kernels done {[round(t, 3) for t in ks]}; last copy-out {outs[-1]:.3f}")
