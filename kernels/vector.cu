// Vector algebra on device arrays, the reductions finished on the device:
// two dot products in one pass, max |x|, w = a x + b y + c w, z = d .* r.
// (kernels/common.cuh is prepended.)

// Two dot products in one pass: out = (a.b, c.d) (c may be null: one product).
extern "C" __global__ void __launch_bounds__(256) dots(i64 n, const double* __restrict__ a,
    const double* __restrict__ b, const double* __restrict__ c, const double* __restrict__ d, double* partial,
    double* out, unsigned int* counter) {
    double s1 = 0.0, s2 = 0.0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        s1 += a[i] * b[i];
        if (c) s2 += c[i] * d[i];
    }
    double t1, t2;
    if (last_block_sums(block_sum(s1), block_sum(s2), partial, counter, t1, t2)) {
        out[0] = t1;
        out[1] = t2;
    }
}

// out = max |x_i| as the bits of a non-negative double, so that a NaN
// anywhere (its bits lie above +inf's once the sign is cleared) shows in
// the result; `out` must be zeroed first. Lets a solve test b == 0 exactly,
// find non-finite inputs and scale the system without any underflow.
extern "C" __global__ void __launch_bounds__(256) amax(i64 n, const double* __restrict__ x, unsigned long long* out) {
    unsigned long long m = 0;
    GRID_STRIDE(i, n) {
        const unsigned long long v = (unsigned long long)__double_as_longlong(fabs(x[i]));
        m = v > m ? v : m;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const unsigned long long o = __shfl_down_sync(0xffffffffu, m, off);
        m = o > m ? o : m;
    }
    if ((threadIdx.x & 31) == 0 && m != 0) atomicMax(out, m);
}

// w = a*x + b*y + c*w (w is not read when c == 0; y may be null when b == 0).
extern "C" __global__ void __launch_bounds__(256) update(i64 n, double a, const double* __restrict__ x, double b,
    const double* __restrict__ y, double c, double* __restrict__ w) {
    GRID_STRIDE(i, n) {
        double r = a * x[i];
        if (b != 0.0) r += b * y[i];
        if (c != 0.0) r += c * w[i];
        w[i] = r;
    }
}

// z = d .* r (Jacobi with d = 1/diag(A)).
extern "C" __global__ void __launch_bounds__(256) scale(i64 n, const double* __restrict__ d, const double* __restrict__ r,
                                                       double* __restrict__ z, const double* sc) {
    if (stopped(sc)) return;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) z[i] = d[i] * r[i];
}

// out[i] = x[from[i]]: a permutation or selection of x (A^T's values from
// A's; the owned values a neighbouring rank needs, packed for one download).
extern "C" __global__ void __launch_bounds__(256) gather(i64 n, const double* __restrict__ x, const int* __restrict__ from,
    double* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = x[from[i]];
}

// y[to[i]] = v[i], or += with add (v null: 0): received values put in place,
// partial sums added to the owners', a rank's ghost dofs cleared. The
// entries of `to` are distinct, so no two threads touch one y[j].
extern "C" __global__ void __launch_bounds__(256) scatter(i64 n, const double* __restrict__ v, const int* __restrict__ to,
    double* __restrict__ y, int add) {
    GRID_STRIDE(i, n) {
        double x = v ? v[i] : 0.0;
        y[to[i]] = add ? y[to[i]] + x : x;
    }
}

// GMRES's Gram-Schmidt over a table V of k vector addresses. multi_dot:
// blocks over (row ranges, groups of BASIS_GROUP vectors), each thread
// reading w[i] once for its group; the block sums go to partial[j][block],
// which sum_rows adds in block order (deterministic).
#define BASIS_GROUP 8
extern "C" __global__ void __launch_bounds__(256) multi_dot(i64 n, int k, const double* const* __restrict__ V,
    const double* __restrict__ w, double* __restrict__ partial) {
    const int j0 = blockIdx.y * BASIS_GROUP;
    const int m = min(BASIS_GROUP, k - j0);
    const double* v[BASIS_GROUP];
    double s[BASIS_GROUP];
#pragma unroll
    for (int j = 0; j < BASIS_GROUP; ++j) {
        v[j] = j < m ? V[j0 + j] : w;
        s[j] = 0.0;
    }
    GRID_STRIDE(i, n) {
        const double wi = w[i];
#pragma unroll
        for (int j = 0; j < BASIS_GROUP; ++j)
            if (j < m) s[j] += v[j][i] * wi;
    }
    for (int j = 0; j < m; ++j) {
        const double t = block_sum(s[j]);
        if (threadIdx.x == 0) partial[(i64)(j0 + j) * gridDim.x + blockIdx.x] = t;
    }
}

// out[j] = the sum of row j of partial (blocks entries), one block per row.
extern "C" __global__ void __launch_bounds__(256) sum_rows(int blocks, const double* __restrict__ partial,
    double* __restrict__ out) {
    double s = 0.0;
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[(i64)blockIdx.x * blocks + b];
    s = block_sum(s);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// w = c w + sum_j h[j] V_j over the table V of k vector addresses (w is not read when c == 0).
extern "C" __global__ void __launch_bounds__(256) multi_axpy(i64 n, int k, const double* const* __restrict__ V,
    const double* __restrict__ h, double c, double* w) {
    GRID_STRIDE(i, n) {
        double r = c != 0.0 ? c * w[i] : 0.0;
        for (int j = 0; j < k; ++j) r += h[j] * V[j][i];
        w[i] = r;
    }
}

// GMRES's projection removed, w -= sum_j c[j] V_j with the c that multi_dot
// left on the device, and (w, w) after it in the same pass (one-pass
// reduction: the last block writes out[0]).
extern "C" __global__ void __launch_bounds__(256) multi_subtract_norm(i64 n, int k, const double* const* __restrict__ V,
    const double* __restrict__ c, double* w, double* partial, double* out, unsigned int* counter) {
    double ss = 0.0;
    GRID_STRIDE(i, n) {
        double r = w[i];
        for (int j = 0; j < k; ++j) r -= c[j] * V[j][i];
        w[i] = r;
        ss += r * r;
    }
    double t1, t2;
    if (last_block_sums(block_sum(ss), 0.0, partial, counter, t1, t2)) out[0] = t1;
}

// Exclusive prefix sum of int counts, in place, 1024 a block (4 a thread):
// each block scans its tile and leaves the tile's total in sums[block];
// scan_add then adds the scanned totals back (src/array/cuda.rs `exclusive_scan`
// recurses on sums). Counts and their total fit int (the caller checks).
#define SCAN_TILE 1024
extern "C" __global__ void __launch_bounds__(256) scan_tiles(i64 n, int* __restrict__ x, int* __restrict__ sums) {
    __shared__ int warp_totals[8];
    const i64 base = (i64)blockIdx.x * SCAN_TILE + 4 * threadIdx.x;
    int v[4], total = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        v[k] = base + k < n ? x[base + k] : 0;
        total += v[k];
    }
    // inclusive scan of the threads' totals: within the warp, then across warps
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int inclusive = total;
    for (int off = 1; off < 32; off <<= 1) {
        const int o = __shfl_up_sync(0xffffffffu, inclusive, off);
        if (lane >= off) inclusive += o;
    }
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    int before = 0;
    for (int w = 0; w < warp; ++w) before += warp_totals[w];
    int run = before + inclusive - total;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if (base + k < n) x[base + k] = run;
        run += v[k];
    }
    if (threadIdx.x == blockDim.x - 1) sums[blockIdx.x] = run;
}

extern "C" __global__ void __launch_bounds__(256) scan_add(i64 n, int* __restrict__ x, const int* __restrict__ sums) {
    const int add = sums[blockIdx.x];
    const i64 base = (i64)blockIdx.x * SCAN_TILE + 4 * threadIdx.x;
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (base + k < n) x[base + k] += add;
}
