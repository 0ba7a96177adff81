// The prelude every kernel file that takes part in a Krylov iteration or a
// one-pass reduction shares (prepended to vector.cu, krylov.cu and
// sparse.cu when they are compiled): the device-resident scalars of a
// device-driven iteration, and the block reductions.

typedef long long i64;

// The scalars of a device-driven CG or BiCGSTAB iteration (src/krylov/cuda.rs
// `Scalar` mirrors this layout). They stay on the device, so an iteration
// needs no host round-trip and replays as a CUDA graph; the host reads them
// back every few iterations. Each kernel of an iteration does nothing unless
// the status is RUNNING, so iterations queued past the end change nothing.
enum Scalar { BNORM, TOL, MAXIT, STATUS, ITER, RR, RZ, PQ, BETA, RHO, RHO_PREV, ALPHA, OMEGA, VALUE, HIST = 16 };
#define HIST_LEN 64  // relative residuals of the last HIST_LEN iterations, by iteration modulo HIST_LEN
enum Status { RUNNING, CONVERGED, MAXITER, HALF_STEP, BREAK_NAN, BREAK_PQ, BREAK_RHO, BREAK_RV, BREAK_TT, BREAK_OMEGA };

__device__ __forceinline__ bool stopped(const double* sc) { return sc && sc[STATUS] != RUNNING; }

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)


__device__ double block_sum(double s) {
    __shared__ double warp_sums[32];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    s = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : 0.0;
    if (warp == 0)
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    __syncthreads();
    return s;
}

// Ends a one-pass reduction: each block stores its two sums; the last block
// to arrive adds all blocks' sums in block order (deterministic, whichever
// block is last) and re-arms the counter. Saves the second launch a
// two-kernel reduction needs. s1, s2: block sums (valid in thread 0).
// Returns true in thread 0 of the last block, with the totals in t1, t2.
__device__ bool last_block_sums(double s1, double s2, double* partial, unsigned int* counter, double& t1, double& t2) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = s1;
        partial[2 * blockIdx.x + 1] = s2;
        __threadfence();
        last = (atomicAdd(counter, 1u) == gridDim.x - 1);
    }
    __syncthreads();
    if (!last) return false;
    __threadfence();
    t1 = 0.0;
    t2 = 0.0;
    for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) {
        t1 += __ldcg(&partial[2 * i]);
        t2 += __ldcg(&partial[2 * i + 1]);
    }
    t1 = block_sum(t1);
    t2 = block_sum(t2);
    if (threadIdx.x != 0) return false;
    *counter = 0;
    return true;
}

// CG's p.Ap into PQ; not positive: breakdown.
__device__ void set_pq(double* sc, double pq) {
    sc[PQ] = pq;
    if (!(pq > 0.0 && isfinite(pq))) {
        sc[VALUE] = pq;
        sc[STATUS] = BREAK_PQ;
    }
}

