"""How much a host-to-device copy slows while the inner-product kernel
streams device memory beside it, by the kernel's grid width (CuPy, events):

    python3 bench/pipeline_probe2.py

Results: bench/results/pipeline-probe-*.
"""
import statistics
import numpy as np
import cupy as cp

rt = cp.cuda.runtime
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
M, W = 1000, 12500          # one chunk of 8: 100 MB per operand
host = np.arange(2 * M * W, dtype=np.float64) % 7
rt.hostRegister(host.ctypes.data, host.nbytes, 0)
dev = cp.empty(2 * M * W)
for fill in ["random", "zeros"]:
    ka = cp.random.random(M * W) if fill == "random" else cp.zeros(M * W)
    kb = cp.random.random(M * W) if fill == "random" else cp.zeros(M * W)
    ko = cp.empty(W)
    sc, sk = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]

    def kernel(grid):
        with sk:
            dots((grid,), (256,), (np.int64(M), np.int64(W), ka, kb, ko))

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
        beside = statistics.median([copy_ms(grid, launches) for _ in range(9)])
        # The copy's rate while the kernel runs, and the time it lost per kernel-millisecond.
        print(f"  grid {grid:5d}: kernel {k * 1e3:7.1f} us ({2 * M * W * 8 / k / 1e6:6.0f} GB/s); copy beside it {beside:.3f} ms = {100 * alone / beside:.1f}% of its rate alone")
