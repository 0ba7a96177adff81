// CSR sparse kernels: SpMV, vector operations with reductions finished on
// the device, Jacobi, and level-scheduled ILU(0) (factor and both solves).
// Indices are 0-based int32; values f64.

typedef long long i64;

// The scalars of a device-driven CG or BiCGSTAB iteration (src/sparse/cuda.rs
// `scalar` mirrors this layout). They stay on the device, so an iteration
// needs no host round-trip and replays as a CUDA graph; the host reads them
// back every few iterations. Each kernel of an iteration does nothing unless
// the status is RUNNING, so iterations queued past the end change nothing.
enum Scalar { BNORM, TOL, MAXIT, STATUS, ITER, RR, RZ, PQ, BETA, RHO, RHO_PREV, ALPHA, OMEGA, VALUE, HIST = 16 };
#define HIST_LEN 64  // relative residuals of the last HIST_LEN iterations, by iteration modulo HIST_LEN
enum Status { RUNNING, CONVERGED, MAXITER, HALF_STEP, BREAK_NAN, BREAK_PQ, BREAK_RHO, BREAK_RV, BREAK_TT, BREAK_OMEGA };

__device__ __forceinline__ bool stopped(const double* sc) { return sc && sc[STATUS] != RUNNING; }

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// y = alpha*A*x + beta*y with TPR threads per row (a power of two <= 32),
// chosen from the mean row length when the matrix is created. With beta == 0,
// y is not read (it may hold anything). Every lane reaches the shuffles, so
// rows past the end are masked, not skipped. `sc` (may be null): the solver
// scalars of a device-driven iteration; the kernel does nothing once they say stop.
// Row `row` of A times x by the TPR lanes of its group, summed into lane 0.
// Every lane of the warp must call it (the shuffles); rows past n give 0.
template <int TPR>
__device__ double row_times(i64 row, int n, int lane, const int* __restrict__ rp, const int* __restrict__ ci,
                            const double* __restrict__ v, const double* __restrict__ x) {
    double sum = 0.0;
    if (row < n) {
        const int e = rp[row + 1];
        for (int k = rp[row] + lane; k < e; k += TPR) sum += v[k] * __ldg(&x[ci[k]]);
    }
#pragma unroll
    for (int off = TPR / 2; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off, TPR);
    return sum;
}

template <int TPR>
__device__ void spmv(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                     const double* __restrict__ x, double* __restrict__ y, double alpha, double beta, const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const double sum = row_times<TPR>(row, n, lane, rp, ci, v, x);
    if (row < n && lane == 0) y[row] = (beta == 0.0) ? alpha * sum : alpha * sum + beta * y[row];
}

#define SPMV(TPR)                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) spmv_tpr##TPR(int n, const int* rp, const int* ci,        \
        const double* v, const double* x, double* y, double alpha, double beta, const double* sc) {            \
        spmv<TPR>(n, rp, ci, v, x, y, alpha, beta, sc);                                                       \
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

// Symmetric Dirichlet conditions, one thread per row i: the free rows move
// the constrained columns' known values to the right-hand side, constrained
// rows and columns are zeroed but for the diagonal, and b_i = a_ii g_i on a
// constrained row. A row's entries are touched by its own thread only.
extern "C" __global__ void __launch_bounds__(256) dirichlet(int n, const int* __restrict__ rp, const int* __restrict__ ci,
    const int* __restrict__ diag, double* __restrict__ v, const unsigned char* __restrict__ fixed,
    const double* __restrict__ g, double* __restrict__ b) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int d = diag[i];
    double bi = b[i];
    for (int k = rp[i]; k < rp[i + 1]; ++k) {
        const int j = ci[k];
        if (!fixed[i] && fixed[j]) bi -= v[k] * g[j];
        if ((fixed[i] || fixed[j]) && k != d) v[k] = 0.0;
    }
    b[i] = fixed[i] ? v[d] * g[i] : bi;
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
    const double* __restrict__ r, double* y, const double* sc) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count || stopped(sc)) return;
    const int i = rows[t];
    double s = r[i];
    for (int kk = rp[i]; kk < diag[i]; ++kk) s -= lu[kk] * y[ci[kk]];
    y[i] = s;
}

// Back substitution with the upper factor, one level, in place: x_i = (y_i - sum_{j>i} u_ij x_j) / u_ii.
extern "C" __global__ void __launch_bounds__(128) usolve_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, const double* __restrict__ lu,
    double* x, const double* sc) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count || stopped(sc)) return;
    const int i = rows[t];
    double s = x[i];
    for (int kk = diag[i] + 1; kk < rp[i + 1]; ++kk) s -= lu[kk] * x[ci[kk]];
    x[i] = s / lu[diag[i]];
}

// ---- Device-driven iterations (scalars in sc, layout above) ----

// Ends iteration ITER + 1 with residual norm^2 rr: records it and stops on a
// non-finite residual or convergence. Returns true while the method goes on.
__device__ bool end_iteration(double* sc, double rr) {
    const double it = sc[ITER] + 1;
    const double rel = sqrt(rr) / sc[BNORM];
    sc[ITER] = it;
    sc[RR] = rr;
    sc[HIST + (i64)it % HIST_LEN] = rel;
    if (!isfinite(rel)) {
        sc[STATUS] = BREAK_NAN;
    } else if (rel <= sc[TOL]) {
        sc[STATUS] = CONVERGED;
    } else {
        return true;
    }
    return false;
}

__device__ void stop_at_maxit(double* sc) {
    if (sc[STATUS] == RUNNING && sc[ITER] >= sc[MAXIT]) sc[STATUS] = MAXITER;
}

// CG's p.Ap into PQ; not positive: breakdown.
__device__ void set_pq(double* sc, double pq) {
    sc[PQ] = pq;
    if (!(pq > 0.0 && isfinite(pq))) {
        sc[VALUE] = pq;
        sc[STATUS] = BREAK_PQ;
    }
}

// CG: q = A p fused with PQ = p.q (not positive: breakdown), TPR lanes per
// row as in spmv. Grid-stride over the rows a warp at a time, so the grid
// fits the reduction's partials and every lane of a warp reaches the shuffles.
template <int TPR>
__device__ void spmv_pq(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                        const double* __restrict__ p, double* __restrict__ q, double* partial, unsigned int* counter,
                        double* sc) {
    if (stopped(sc)) return;
    const int per_warp = 32 / TPR, lane = threadIdx.x & (TPR - 1), group = (threadIdx.x & 31) / TPR;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    double dot = 0.0;
    for (i64 first = warp * per_warp; first < n; first += warps * per_warp) {
        const i64 row = first + group;
        const double sum = row_times<TPR>(row, n, lane, rp, ci, v, p);
        if (row < n && lane == 0) {
            q[row] = sum;
            dot += p[row] * sum;
        }
    }
    double pq, unused;
    if (last_block_sums(block_sum(dot), 0.0, partial, counter, pq, unused)) {
        set_pq(sc, pq);
    }
}

// CG: PQ = p.q after a separate q = A p (long rows, where the fused form
// above measured slower: BENCHMARKS.md); not positive: breakdown.
extern "C" __global__ void __launch_bounds__(256) cg_pq(i64 n, const double* __restrict__ p, const double* __restrict__ q,
    double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    double s = 0.0;
    GRID_STRIDE(i, n) s += p[i] * q[i];
    double pq, unused;
    if (last_block_sums(block_sum(s), 0.0, partial, counter, pq, unused)) {
        set_pq(sc, pq);
    }
}

#define SPMV_PQ(TPR)                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) spmv_pq_tpr##TPR(int n, const int* rp, const int* ci,     \
        const double* v, const double* p, double* q, double* partial, unsigned int* counter, double* sc) {     \
        spmv_pq<TPR>(n, rp, ci, v, p, q, partial, counter, sc);                                               \
    }
SPMV_PQ(1) SPMV_PQ(2)

// CG's vector step in one pass with alpha = RZ / PQ: x += alpha p; r -= alpha q;
// z = d .* r when d is given (Jacobi; otherwise z is r), then (r.z, r.r) end
// the iteration (BETA = r.z / RZ). With `rz_follows` (ILU(0): z comes from the
// triangular sweeps after this kernel), only RR is stored and cg_rz ends it.
extern "C" __global__ void __launch_bounds__(256) cg_step(i64 n, const double* __restrict__ p,
    const double* __restrict__ q, double* __restrict__ x, double* __restrict__ r, const double* __restrict__ d,
    double* __restrict__ z, int rz_follows, double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    const double alpha = sc[RZ] / sc[PQ];
    double s1 = 0.0, s2 = 0.0;
    GRID_STRIDE(i, n) {
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
    double rz, rr;
    if (last_block_sums(block_sum(s1), block_sum(s2), partial, counter, rz, rr)) {
        if (rz_follows) {
            sc[RR] = rr;
            return;
        }
        sc[BETA] = rz / sc[RZ];
        sc[RZ] = rz;
        if (end_iteration(sc, rr)) stop_at_maxit(sc);
    }
}

// CG with ILU(0): r.z after the sweeps ends the iteration.
extern "C" __global__ void __launch_bounds__(256) cg_rz(i64 n, const double* __restrict__ r, const double* __restrict__ z,
    double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    double s = 0.0;
    GRID_STRIDE(i, n) s += r[i] * z[i];
    double rz, unused;
    if (last_block_sums(block_sum(s), 0.0, partial, counter, rz, unused)) {
        sc[BETA] = rz / sc[RZ];
        sc[RZ] = rz;
        if (end_iteration(sc, sc[RR])) stop_at_maxit(sc);
    }
}

// CG: p = z + BETA p.
extern "C" __global__ void __launch_bounds__(256) cg_direction(i64 n, const double* __restrict__ z, double* __restrict__ p,
    const double* sc) {
    if (stopped(sc)) return;
    const double beta = sc[BETA];
    GRID_STRIDE(i, n) p[i] = z[i] + beta * p[i];
}

// BiCGSTAB: p = r on the first iteration, then p = r + beta (p - OMEGA v)
// with beta = (RHO / RHO_PREV) (ALPHA / OMEGA).
extern "C" __global__ void __launch_bounds__(256) bicg_direction(i64 n, const double* __restrict__ r,
    const double* __restrict__ v, double* __restrict__ p, const double* sc) {
    if (stopped(sc)) return;
    if (sc[ITER] == 0) {
        GRID_STRIDE(i, n) p[i] = r[i];
        return;
    }
    const double omega = sc[OMEGA];
    const double beta = (sc[RHO] / sc[RHO_PREV]) * (sc[ALPHA] / omega);
    GRID_STRIDE(i, n) p[i] = r[i] + beta * (p[i] - omega * v[i]);
}

// BiCGSTAB: ALPHA = RHO / (r0, v); a zero (r0, v) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_alpha(i64 n, const double* __restrict__ rhat,
    const double* __restrict__ v, double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    double s = 0.0;
    GRID_STRIDE(i, n) s += rhat[i] * v[i];
    double rv, unused;
    if (last_block_sums(block_sum(s), 0.0, partial, counter, rv, unused)) {
        if (rv == 0.0 || !isfinite(rv)) {
            sc[VALUE] = rv;
            sc[STATUS] = BREAK_RV;
        } else {
            sc[ALPHA] = sc[RHO] / rv;
        }
    }
}

// BiCGSTAB: s = r - ALPHA v; a small enough s ends the iteration half way
// (HALF_STEP: bicg_update then adds only ALPHA phat to x).
extern "C" __global__ void __launch_bounds__(256) bicg_s(i64 n, const double* __restrict__ r, const double* __restrict__ v,
    double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    const double alpha = sc[ALPHA];
    double ss = 0.0;
    GRID_STRIDE(i, n) {
        const double si = r[i] - alpha * v[i];
        s[i] = si;
        ss += si * si;
    }
    double total, unused;
    if (last_block_sums(block_sum(ss), 0.0, partial, counter, total, unused)) {
        const double snorm = sqrt(total) / sc[BNORM];
        if (snorm <= sc[TOL]) {
            const double it = sc[ITER] + 1;
            sc[ITER] = it;
            sc[HIST + (i64)it % HIST_LEN] = snorm;
            sc[STATUS] = HALF_STEP;
        }
    }
}

// BiCGSTAB: OMEGA = (t, s) / (t, t); a zero (t, t) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_omega(i64 n, const double* __restrict__ t,
    const double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
    if (stopped(sc)) return;
    double ts = 0.0, tt = 0.0;
    GRID_STRIDE(i, n) {
        ts += t[i] * s[i];
        tt += t[i] * t[i];
    }
    double ts_total, tt_total;
    if (last_block_sums(block_sum(ts), block_sum(tt), partial, counter, ts_total, tt_total)) {
        if (tt_total == 0.0 || !isfinite(tt_total)) {
            sc[VALUE] = tt_total;
            sc[STATUS] = BREAK_TT;
        } else {
            sc[OMEGA] = ts_total / tt_total;
        }
    }
}

// BiCGSTAB's end of iteration in one pass: x += ALPHA phat + OMEGA shat;
// r = s - OMEGA t, with (r, r) and the next rho = (r0, r). After a HALF_STEP,
// only x += ALPHA phat, and the solve has converged.
extern "C" __global__ void __launch_bounds__(256) bicg_update(i64 n, const double* __restrict__ phat,
    const double* __restrict__ shat, const double* __restrict__ s, const double* __restrict__ t,
    const double* __restrict__ rhat, double* __restrict__ x, double* __restrict__ r, double* partial,
    unsigned int* counter, double* sc) {
    const double status = sc[STATUS];
    if (status != RUNNING && status != HALF_STEP) return;
    const bool half = status == HALF_STEP;
    const double alpha = sc[ALPHA], omega = half ? 0.0 : sc[OMEGA];
    double rr = 0.0, rho = 0.0;
    GRID_STRIDE(i, n) {
        if (half) {
            x[i] += alpha * phat[i];
            continue;
        }
        x[i] += alpha * phat[i] + omega * shat[i];
        const double ri = s[i] - omega * t[i];
        r[i] = ri;
        rr += ri * ri;
        rho += ri * rhat[i];
    }
    double rr_total, rho_total;
    if (last_block_sums(block_sum(rr), block_sum(rho), partial, counter, rr_total, rho_total)) {
        if (half) {
            sc[STATUS] = CONVERGED;
            return;
        }
        if (!end_iteration(sc, rr_total)) return;
        if (omega == 0.0) {
            sc[STATUS] = BREAK_OMEGA;
            return;
        }
        stop_at_maxit(sc);
        sc[RHO_PREV] = sc[RHO];
        sc[RHO] = rho_total;
        if (sc[STATUS] == RUNNING && (rho_total == 0.0 || !isfinite(rho_total))) {
            sc[VALUE] = rho_total;
            sc[STATUS] = BREAK_RHO;
        }
    }
}
