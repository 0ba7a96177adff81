// CSR sparse kernels: SpMV, vector operations with reductions finished on
// the device, Jacobi, and level-scheduled ILU(0) (factor and both solves).
// Indices are 0-based int32; values f64.

typedef long long i64;

// y = alpha*A*x + beta*y with TPR threads per row (a power of two <= 32),
// chosen from the mean row length when the matrix is created. With beta == 0,
// y is not read (it may hold anything). Every lane reaches the shuffles, so
// rows past the end are masked, not skipped.
template <int TPR>
__device__ void spmv(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                     const double* __restrict__ x, double* __restrict__ y, double alpha, double beta) {
    const i64 gid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 row = gid / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    double sum = 0.0;
    if (row < n) {
        const int e = rp[row + 1];
        for (int k = rp[row] + lane; k < e; k += TPR) sum += v[k] * __ldg(&x[ci[k]]);
    }
#pragma unroll
    for (int off = TPR / 2; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off, TPR);
    if (row < n && lane == 0) y[row] = (beta == 0.0) ? alpha * sum : alpha * sum + beta * y[row];
}

#define SPMV(TPR)                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) spmv_tpr##TPR(int n, const int* rp, const int* ci,        \
        const double* v, const double* x, double* y, double alpha, double beta) {                              \
        spmv<TPR>(n, rp, ci, v, x, y, alpha, beta);                                                           \
    }
SPMV(1) SPMV(2) SPMV(4) SPMV(8) SPMV(16) SPMV(32)

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
// block is last) into out[0..1] and re-arms the counter. Saves the second
// launch a two-kernel reduction needs. s1, s2: block sums (valid in thread 0).
__device__ void finish_if_last(double s1, double s2, double* partial, double* out, unsigned int* counter) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = s1;
        partial[2 * blockIdx.x + 1] = s2;
        __threadfence();
        last = (atomicAdd(counter, 1u) == gridDim.x - 1);
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double t1 = 0.0, t2 = 0.0;
    for (int i = threadIdx.x; i < gridDim.x; i += blockDim.x) {
        t1 += __ldcg(&partial[2 * i]);
        t2 += __ldcg(&partial[2 * i + 1]);
    }
    t1 = block_sum(t1);
    t2 = block_sum(t2);
    if (threadIdx.x == 0) {
        out[0] = t1;
        out[1] = t2;
        *counter = 0;
    }
}

// Two dot products in one pass: out = (a.b, c.d) (c may be null: one product).
extern "C" __global__ void __launch_bounds__(256) dots(i64 n, const double* __restrict__ a,
    const double* __restrict__ b, const double* __restrict__ c, const double* __restrict__ d, double* partial,
    double* out, unsigned int* counter) {
    double s1 = 0.0, s2 = 0.0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        s1 += a[i] * b[i];
        if (c) s2 += c[i] * d[i];
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    finish_if_last(s1, s2, partial, out, counter);
}

// w = a*x + b*y + c*w (w is not read when c == 0; y may be null when b == 0).
// With `partial` given, also out = (w.w, w.u) (u may be null), so a residual
// update, its norm and BiCGSTAB's next rho = (r0, r) take one pass.
extern "C" __global__ void __launch_bounds__(256) update(i64 n, double a, const double* __restrict__ x, double b,
    const double* __restrict__ y, double c, double* __restrict__ w, const double* __restrict__ u, double* partial,
    double* out, unsigned int* counter) {
    double s = 0.0, t = 0.0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        double r = a * x[i];
        if (b != 0.0) r += b * y[i];
        if (c != 0.0) r += c * w[i];
        w[i] = r;
        s += r * r;
        if (u) t += r * u[i];
    }
    if (partial) {
        s = block_sum(s);
        t = block_sum(t);
        finish_if_last(s, t, partial, out, counter);
    }
}

// z = d .* r (Jacobi with d = 1/diag(A)).
extern "C" __global__ void __launch_bounds__(256) scale(i64 n, const double* __restrict__ d, const double* __restrict__ r,
                                                       double* __restrict__ z) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) z[i] = d[i] * r[i];
}

// ILU(0), one level of rows at a time (rows of a level depend only on rows of
// earlier levels). One thread per row runs the serial IKJ row update in the
// CPU reference's order (equal to rounding: the GPU fuses multiply-adds). A
// pivot that is zero or not finite records its row in *bad (smallest wins).
extern "C" __global__ void __launch_bounds__(128) ilu0_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, double* lu, int* bad) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int i = rows[t];
    const int ei = rp[i + 1];
    for (int kk = rp[i]; kk < diag[i]; ++kk) {
        const int k = ci[kk];
        const double lik = lu[kk] / lu[diag[k]];
        lu[kk] = lik;
        int jj = kk + 1, p = diag[k] + 1;
        const int ek = rp[k + 1];
        while (jj < ei && p < ek) {
            const int cj = ci[jj], ck = ci[p];
            if (cj == ck) {
                lu[jj] -= lik * lu[p];
                ++jj;
                ++p;
            } else if (cj < ck) {
                ++jj;
            } else {
                ++p;
            }
        }
    }
    const double piv = lu[diag[i]];
    if (piv == 0.0 || !isfinite(piv)) atomicMin(bad, i);
}

// Forward substitution with the unit lower factor, one level: y_i = r_i - sum_{j<i} l_ij y_j.
extern "C" __global__ void __launch_bounds__(128) lsolve_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, const double* __restrict__ lu,
    const double* __restrict__ r, double* y) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int i = rows[t];
    double s = r[i];
    for (int kk = rp[i]; kk < diag[i]; ++kk) s -= lu[kk] * y[ci[kk]];
    y[i] = s;
}

// Back substitution with the upper factor, one level, in place: x_i = (y_i - sum_{j>i} u_ij x_j) / u_ii.
extern "C" __global__ void __launch_bounds__(128) usolve_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, const double* __restrict__ lu,
    double* x) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int i = rows[t];
    double s = x[i];
    for (int kk = diag[i] + 1; kk < rp[i + 1]; ++kk) s -= lu[kk] * x[ci[kk]];
    x[i] = s / lu[diag[i]];
}

// CG's vector step in one pass, with alpha = rz / p.Ap read from the device
// (out[2], left there by the dots launch before), so the host waits once per
// iteration: x += alpha p; r -= alpha q; z = d .* r when d is given (Jacobi;
// otherwise z is r); out[0..1] = (r.z, r.r). A p.Ap that is not positive
// leaves x and r as they were (the host reports the breakdown).
extern "C" __global__ void __launch_bounds__(256) cg_step(i64 n, double rz, const double* __restrict__ p,
    const double* __restrict__ q, double* __restrict__ x, double* __restrict__ r, const double* __restrict__ d,
    double* __restrict__ z, double* partial, double* out, unsigned int* counter) {
    const double pq = out[2];
    const bool ok = pq > 0.0 && isfinite(pq);
    const double alpha = ok ? rz / pq : 0.0;
    const i64 len = ok ? n : 0;
    double s1 = 0.0, s2 = 0.0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += (i64)gridDim.x * blockDim.x) {
        x[i] += alpha * p[i];
        const double ri = r[i] - alpha * q[i];
        r[i] = ri;
        double zi = ri;
        if (d) {
            zi = d[i] * ri;
            z[i] = zi;
        }
        s1 += ri * zi;
        s2 += ri * ri;
    }
    s1 = block_sum(s1);
    s2 = block_sum(s2);
    finish_if_last(s1, s2, partial, out, counter);
}
