// CSR sparse kernels: SpMV (also fused with CG's p.Ap), Dirichlet rows,
// ILU(0): the factorisation level by level, the triangular solves
// synchronisation-free (one launch per sweep) or level by level. Indices are 0-based
// int32; values f64. (kernels/common.cuh and csr.cuh are prepended.)

// y = alpha*A*x + beta*y with TPR threads per row (a power of two <= 32),
// chosen from the mean row length when the matrix is created. With beta == 0,
// y is not read (it may hold anything). Every lane reaches the shuffles, so
// rows past the end are masked, not skipped. `sc` (may be null): the solver
// scalars of a device-driven iteration; the kernel does nothing once they say stop.
// V: the values' type, double, or float for f32 copies (spmv_f32_*: the AMG
// cycle's, src/amg/cuda.rs); x, y and the sums stay double.
// A row with more than long_len entries is skipped (left to spmv_long_rows,
// a block a row): one such row in a group of TPR lanes would hold the whole
// launch back.
template <int TPR, typename V>
__device__ void spmv(int n, const int* __restrict__ rp, const int* __restrict__ ci, const V* __restrict__ v,
                     const double* __restrict__ x, double* __restrict__ y, double alpha, double beta, const double* sc,
                     int long_len) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const bool mine = row < n && rp[row + 1] - rp[row] <= long_len;
    const double sum = row_times<TPR>(mine ? row : n, n, lane, rp, ci, v, x);
    if (mine && lane == 0) y[row] = (beta == 0.0) ? alpha * sum : alpha * sum + beta * y[row];
}

#define SPMV(TPR)                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) spmv_tpr##TPR(int n, const int* rp, const int* ci,        \
        const double* v, const double* x, double* y, double alpha, double beta, const double* sc, int long_len) { \
        if constexpr (WANTED(spmv_tpr##TPR)) {                                                                     \
            spmv<TPR, double>(n, rp, ci, v, x, y, alpha, beta, sc, long_len);                                      \
        }                                                                                                          \
    }                                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) spmv_f32_tpr##TPR(int n, const int* rp, const int* ci,    \
        const float* v, const double* x, double* y, double alpha, double beta, const double* sc, int long_len) { \
        if constexpr (WANTED(spmv_f32_tpr##TPR)) {                                                                \
            spmv<TPR, float>(n, rp, ci, v, x, y, alpha, beta, sc, long_len);                                      \
        }                                                                                                         \
    }
SPMV(1) SPMV(2) SPMV(4) SPMV(8) SPMV(16) SPMV(32)

// y[row] = alpha (A x)_row + beta y[row] over the long rows, cut into chunks
// of LONG_CHUNK entries, a block a chunk (grid-stride over the chunks), so a
// row of 10^5 entries is read by many multiprocessors. chunk_row[c]: chunk
// c's row in `rows`; first_chunk[q]..first_chunk[q+1]: row q's chunks. A
// row of several chunks: each chunk's sum goes to partial[c], and the last
// of the row's chunks to finish (counted in done[q]) adds them in chunk
// order, so y is the same in every run, and re-arms the count.
#define LONG_CHUNK 4096
template <typename V>
__device__ void long_rows(int chunks, const int* __restrict__ chunk_row, const int* __restrict__ first_chunk,
                          const int* __restrict__ rows, const int* __restrict__ rp, const int* __restrict__ ci,
                          const V* __restrict__ v, const double* __restrict__ x, double* __restrict__ y, double alpha,
                          double beta, double* partial, unsigned int* done, const double* sc) {
    if (stopped(sc)) return;
    __shared__ bool last;
    for (int c = blockIdx.x; c < chunks; c += gridDim.x) {
        const int q = chunk_row[c], row = rows[q], first = first_chunk[q], count = first_chunk[q + 1] - first;
        const int b = rp[row] + (c - first) * LONG_CHUNK, e = min(b + LONG_CHUNK, rp[row + 1]);
        double s = 0.0;
#pragma unroll 4
        for (int k = b + threadIdx.x; k < e; k += blockDim.x) s += (double)v[k] * __ldg(&x[ci[k]]);
        s = block_sum(s);
        if (threadIdx.x == 0) {
            last = count == 1;
            if (count > 1) {
                partial[c] = s;
                __threadfence();  // the partial before the count
                last = atomicAdd(&done[q], 1u) == (unsigned int)count - 1;
                if (last) {
                    __threadfence();
                    s = 0.0;
                    for (int j = first; j < first + count; ++j) s += __ldcg(&partial[j]);
                    done[q] = 0;
                }
            }
            if (last) y[row] = (beta == 0.0) ? alpha * s : alpha * s + beta * y[row];
        }
        __syncthreads();  // `last` is rewritten for the next chunk
    }
}

#define LONG_ROWS(NAME, V)                                                                                     \
    extern "C" __global__ void __launch_bounds__(256) NAME(int chunks, const int* chunk_row,                    \
        const int* first_chunk, const int* rows, const int* rp, const int* ci, const V* v, const double* x,     \
        double* y, double alpha, double beta, double* partial, unsigned int* done, const double* sc) {          \
        if constexpr (WANTED(NAME)) {                                                                            \
            long_rows<V>(chunks, chunk_row, first_chunk, rows, rp, ci, v, x, y, alpha, beta, partial, done, sc); \
        }                                                                                                        \
    }
LONG_ROWS(spmv_long_rows, double) LONG_ROWS(spmv_f32_long_rows, float)

// Symmetric Dirichlet conditions, one thread per row i: the free rows move
// the constrained columns' known values to the right-hand side, constrained
// rows and columns are zeroed but for the diagonal, and b_i = a_ii g_i on a
// constrained row. A row's entries are touched by its own thread only.
extern "C" __global__ void __launch_bounds__(256) dirichlet(int n, const int* __restrict__ rp, const int* __restrict__ ci,
    const int* __restrict__ diag, double* __restrict__ v, const unsigned char* __restrict__ fixed,
    const double* __restrict__ g, double* __restrict__ b) {
    if constexpr (WANTED(dirichlet)) {
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
}

// ILU(0), one level of rows at a time (rows of a level depend only on rows of
// earlier levels). One thread per row runs the serial IKJ row update in the
// CPU reference's order (equal to rounding: the GPU fuses multiply-adds). A
// pivot that is zero or not finite records its row in *bad (smallest wins).
extern "C" __global__ void __launch_bounds__(128) ilu0_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, double* lu, int* bad) {
    if constexpr (WANTED(ilu0_level)) {
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
}

// ILU(0)'s factors of A turned into those of M^T = U^T L^T in A^T's pattern
// (src/sparse/transpose.rs), one thread per row of A^T: entry k of A^T is
// entry from[k] of A; below the diagonal u_ji / u_jj, on it u_ii, above it u_ii l_ji.
extern "C" __global__ void __launch_bounds__(256) ilu_transpose(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const int* __restrict__ from, const int* __restrict__ a_diag,
    const double* __restrict__ lu, double* __restrict__ out) {
    if constexpr (WANTED(ilu_transpose)) {
        const int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        for (int k = rp[i]; k < rp[i + 1]; ++k) {
            const int j = ci[k];
            const double v = lu[from[k]];
            out[k] = j < i ? v / lu[a_diag[j]] : j == i ? v : v * lu[a_diag[i]];
        }
    }
}

// ILU(0) with each triangular solve replaced by Jacobi sweeps (as AmgX and
// hypre offer): no dependency between rows, one launch a sweep, TPR lanes a
// row as the SpMV, over one strict triangle of the factors stored as its own
// CSR matrix (rp, ci, t) and U's diagonal d. Lower, from y_0 = r: y_out = r -
// L_s y_in. Upper, from z_0 = D^-1 y: z_out = D^-1 (y - U_s z_in), z_in read
// as D^-1 z_in when scale_in (the first sweep reads y). The CPU reference
// (cpu::ilu0_apply_jacobi) sums each row in order: equal to rounding.
template <int TPR>
__device__ void jacobi_sweep(int n, const int* __restrict__ rp, const int* __restrict__ ci,
    const double* __restrict__ t, const double* __restrict__ d, const double* __restrict__ y,
    const double* __restrict__ in, int upper, int scale_in, double* __restrict__ out, const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    double sum = 0.0;
    if (row < n) {
        const int e = rp[row + 1];
        for (int k = rp[row] + lane; k < e; k += TPR) {
            const int j = ci[k];
            sum += t[k] * (scale_in ? __ldg(&in[j]) / __ldg(&d[j]) : __ldg(&in[j]));
        }
    }
    sum = group_sum<TPR>(sum);
    if (row < n && lane == 0) out[row] = upper ? (y[row] - sum) / d[row] : y[row] - sum;
}

#define JACOBI_SWEEP(TPR)                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) ilu_jacobi_tpr##TPR(int n, const int* rp, const int* ci,  \
        const double* t, const double* d, const double* y, const double* in, int upper, int scale_in,           \
        double* out, const double* sc) {                                                                        \
        if constexpr (WANTED(ilu_jacobi_tpr##TPR)) {                                                             \
            jacobi_sweep<TPR>(n, rp, ci, t, d, y, in, upper, scale_in, out, sc);                                 \
        }                                                                                                        \
    }
JACOBI_SWEEP(1) JACOBI_SWEEP(2) JACOBI_SWEEP(4) JACOBI_SWEEP(8) JACOBI_SWEEP(16) JACOBI_SWEEP(32)

// Forward substitution with the unit lower factor, one level: y_i = r_i - sum_{j<i} l_ij y_j.
extern "C" __global__ void __launch_bounds__(128) lsolve_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, const double* __restrict__ lu,
    const double* __restrict__ r, double* y, const double* sc) {
    if constexpr (WANTED(lsolve_level)) {
        const int t = blockIdx.x * blockDim.x + threadIdx.x;
        if (t >= count || stopped(sc)) return;
        const int i = rows[t];
        double s = r[i];
        for (int kk = rp[i]; kk < diag[i]; ++kk) s -= lu[kk] * y[ci[kk]];
        y[i] = s;
    }
}

// Back substitution with the upper factor, one level, in place: x_i = (y_i - sum_{j>i} u_ij x_j) / u_ii.
extern "C" __global__ void __launch_bounds__(128) usolve_level(int count, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag, const double* __restrict__ lu,
    double* x, const double* sc) {
    if constexpr (WANTED(usolve_level)) {
        const int t = blockIdx.x * blockDim.x + threadIdx.x;
        if (t >= count || stopped(sc)) return;
        const int i = rows[t];
        double s = x[i];
        for (int kk = diag[i] + 1; kk < rp[i + 1]; ++kk) s -= lu[kk] * x[ci[kk]];
        x[i] = s / lu[diag[i]];
    }
}

// Multicolour ILU(0) (src/sparse/multicolour.rs): the rows lo..hi of one
// colour of P A P^T a launch, TPR lanes a row (rows of one colour are not
// coupled). mode 0, the lower sweep: y_i = r_perm[i] - sum_{j<i} l_ij y_j.
// mode 1, both sweeps of the last colour, which has no upper neighbours:
// x_i = (r_perm[i] - sum_{j<i} l_ij y_j) / u_ii. mode 2, the upper sweep:
// x_i = (y_i - sum_{j>i} u_ij x_j) / u_ii. Modes 1 and 2 keep x_i in y for
// the colours before and put it out as z_perm[i], so that P and P^T cost no
// pass of their own. z may be r (a row reads r_perm[i] before it writes there).
// mode 3, the product U P r of the split form's entry (no dependency, any
// colour order): y_i = u_ii r_perm[i] + sum_{j>i} u_ij r_perm[j]. mode 4,
// the product L r in P A P^T's order (the split form's residual):
// y_i = r_i + sum_{j<i} l_ij r_j.
template <int TPR>
__device__ void ilu_colour(int lo, int hi, int mode, const int* __restrict__ rp, const int* __restrict__ ci,
                           const int* __restrict__ diag, const double* __restrict__ lu, const int* __restrict__ perm,
                           const double* r, double* y, double* z, const double* sc) {
    if (stopped(sc)) return;
    const i64 row = lo + ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const bool mine = row < hi;
    double sum = 0.0;
    int d = 0;
    if (mine) {
        d = diag[row];
        const bool upper = mode == 2 || mode == 3;
        const int b = upper ? d + 1 : rp[row], e = upper ? rp[row + 1] : d;
        if (mode == 3) {
            for (int k = b + lane; k < e; k += TPR) sum += lu[k] * r[perm[ci[k]]];
        } else if (mode == 4) {
            for (int k = b + lane; k < e; k += TPR) sum += lu[k] * r[ci[k]];
        } else {
            for (int k = b + lane; k < e; k += TPR) sum += lu[k] * y[ci[k]];
        }
    }
    sum = group_sum<TPR>(sum);
    if (mine && lane == 0) {
        if (mode == 3) {
            y[row] = lu[d] * r[perm[row]] + sum;
        } else if (mode == 4) {
            y[row] = r[row] + sum;
        } else if (mode == 0) {
            y[row] = r[perm[row]] - sum;
        } else {
            const double x = ((mode == 2 ? y[row] : r[perm[row]]) - sum) / lu[d];
            y[row] = x;
            z[perm[row]] = x;
        }
    }
}

#define ILU_COLOUR(TPR)                                                                                         \
    extern "C" __global__ void __launch_bounds__(256) ilu_colour_tpr##TPR(int lo, int hi, int mode,            \
        const int* rp, const int* ci, const int* diag, const double* lu, const int* perm, const double* r,     \
        double* y, double* z, const double* sc) {                                                               \
        if constexpr (WANTED(ilu_colour_tpr##TPR)) {                                                            \
            ilu_colour<TPR>(lo, hi, mode, rp, ci, diag, lu, perm, r, y, z, sc);                                 \
        }                                                                                                       \
    }
ILU_COLOUR(1) ILU_COLOUR(2) ILU_COLOUR(4) ILU_COLOUR(8) ILU_COLOUR(16) ILU_COLOUR(32)

// Multicolour ILU(0) applied split with Eisenstat's trick (src/sparse/
// multicolour.rs): out = L^-1 A U^-1 v in P A P^T's order, where ILU(0)
// left A's off-diagonal entries as they were (a graph without triangles),
// so A = L D~ + U + (D - 2 D~): t = U^-1 v, out = D~ t + L^-1 (v + e t),
// e = D - 2 D~. No product with A: one pass over each triangle. A launch a
// colour: mode 1, the upper sweep t_i = (v_i - sum_{j>i} u_ij t_j) / u_ii
// (colours second last to second); mode 2, the lower sweep of colours
// second to last, s_i = v_i + e_i t_i - sum_{j<i} l_ij s_j, out_i = u_ii t_i
// + s_i; mode 3, both for the first colour. The last colour (rows from
// `last`) has no upper neighbours: its t_j = v_j / u_jj is computed where it
// is read (pivot u_jj), not swept. A row's s_i replaces its t_i, which no
// later row reads (the upper sweep is over when a lower one starts); out may
// be v (a row reads v_i alone, before it writes out_i).
template <int TPR>
__device__ void ilu_split(int lo, int hi, int last, int mode, const int* __restrict__ rp, const int* __restrict__ ci,
                          const int* __restrict__ diag, const double* __restrict__ lu, const double* __restrict__ e,
                          const double* __restrict__ pivot, const double* v, double* t, double* out, const double* sc) {
    if (stopped(sc)) return;
    const i64 row = lo + ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const bool mine = row < hi;
    double up = 0.0, low = 0.0;
    int d = 0;
    if (mine) {
        d = diag[row];
        if (mode & 1) {
            for (int k = d + 1 + lane; k < rp[row + 1]; k += TPR) {
                const int j = ci[k];
                up += lu[k] * (j >= last ? v[j] / pivot[j] : t[j]);
            }
        }
        if (mode & 2) {
            for (int k = rp[row] + lane; k < d; k += TPR) low += lu[k] * t[ci[k]];
        }
    }
    up = group_sum<TPR>(up);
    low = group_sum<TPR>(low);
    if (mine && lane == 0) {
        const double u = lu[d], vi = v[row];
        const double ti = (mode & 1) ? (vi - up) / u : row >= last ? vi / u : t[row];
        if (mode & 2) {
            const double s = vi + e[row] * ti - low;
            t[row] = s;
            out[row] = u * ti + s;
        } else {
            t[row] = ti;
        }
    }
}

#define ILU_SPLIT(TPR)                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) ilu_split_tpr##TPR(int lo, int hi, int last, int mode,   \
        const int* rp, const int* ci, const int* diag, const double* lu, const double* e, const double* pivot, \
        const double* v, double* t, double* out, const double* sc) {                                            \
        if constexpr (WANTED(ilu_split_tpr##TPR)) {                                                             \
            ilu_split<TPR>(lo, hi, last, mode, rp, ci, diag, lu, e, pivot, v, t, out, sc);                      \
        }                                                                                                       \
    }
ILU_SPLIT(1) ILU_SPLIT(2) ILU_SPLIT(4) ILU_SPLIT(8) ILU_SPLIT(16) ILU_SPLIT(32)

// The split form's e = D - 2 D~ (A's diagonal, from A's stored entry
// a_from[i], less twice the pivot u_ii) and the pivots alone.
extern "C" __global__ void ilu_split_shift(int n, const int* __restrict__ diag, const int* __restrict__ a_from,
                                           const double* __restrict__ a, const double* __restrict__ lu, double* e,
                                           double* pivot) {
    if constexpr (WANTED(ilu_split_shift)) {
        GRID_STRIDE(i, n) {
            const double u = lu[diag[i]];
            pivot[i] = u;
            e[i] = a[a_from[i]] - 2.0 * u;
        }
    }
}

// ---- ILU(0) triangular solves in one launch per sweep (synchronisation-free) ----
//
// The rows are cut into chunks of consecutive rows (for the upper sweep
// counted from the last row), one block per chunk. A block walks its
// chunk's rows by their global dependency level, a barrier between levels,
// and keeps the chunk's values in shared memory: a dependency inside the
// chunk is read there, computed at an earlier level. A dependency in an
// earlier chunk is polled in global memory, where each value is its own
// completion flag: the sweep's output starts as ILU_PENDING (all bits set,
// a NaN arithmetic does not produce; a computed value with those bits is
// stored as the canonical NaN instead). No fences, no progress words: chunk
// c runs a hop behind chunk c-1, not a hop behind at every level. Blocks
// take chunks in order from a ticket, so a block only waits for chunks that
// running blocks hold (no deadlock whatever the residency); the last block
// to finish re-arms the ticket, so the kernel replays in a CUDA graph as
// is. Sums run in CSR order, as the CPU reference's do.
//
// Keeping the outputs pending (the chunks and the grid walk; the plane
// pipeline polls its blocks' own slots and writes y and z plainly): the
// lower sweep marks z (the upper sweep's output) pending row by row after
// reading r_i (z may be r), and the upper sweep marks y (the lower sweep's
// output, a scratch vector) pending again after reading y_i; the scratch is
// marked pending when it is allocated.
// A wait longer than ILU_WAIT_NS (a bad schedule: a bug) reads NaN, so the
// solve ends in a breakdown instead of hanging the device.
#define ILU_PENDING (-1LL)
#define ILU_WAIT_NS 2000000000ull
#define SWEEP_REG 8

__device__ __forceinline__ bool pending(double v) { return __double_as_longlong(v) == ILU_PENDING; }

// A value another block publishes, read once (relaxed, device scope).
__device__ __forceinline__ double ld_relaxed(const double* p) {
    double v;
    asm volatile("ld.relaxed.gpu.global.f64 %0, [%1];" : "=d"(v) : "l"(p) : "memory");
    return v;
}

// Another block's value once computed, read from L2.
__device__ __forceinline__ double await_global(const double* p) {
    double v = ld_relaxed(p);
    if (!pending(v)) return v;
    const unsigned long long start = global_ns();
    for (unsigned int spins = 1;; ++spins) {
        v = ld_relaxed(p);
        if (!pending(v)) return v;
        if ((spins & 255u) == 0 && global_ns() - start > ILU_WAIT_NS) return __longlong_as_double(0x7ff8000000000000LL);
    }
}

// 8 bytes from global to shared memory, asynchronously (cp.async groups:
// committed a step at a time, waited for PIPE_LEAD steps later).
__device__ __forceinline__ void cp_async8(double* dst, const double* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// A row of a sweep with its x-independent data in registers (loaded ahead,
// while the block waits at the previous level's barrier): the row, its
// right-hand side, U's diagonal (upper), and up to SWEEP_REG entries;
// longer rows take the loop.
struct SweepRow {
    int i, b, e;
    double s, d;
    int k[SWEEP_REG];
    double l[SWEEP_REG];
};

// The last block to finish re-arms the ticket and the count of finished blocks.
__device__ __forceinline__ void sweep_rearm(unsigned int* ctl) {
    if (threadIdx.x == 0 && atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
        ctl[0] = 0;
        ctl[1] = 0;
        __threadfence();
    }
}

// Loads row i, then marks pend_i pending (after rhs_i is read: pend may be rhs).
template <bool UPPER>
__device__ __forceinline__ void sweep_load(SweepRow& w, int i, const int* __restrict__ rp, const int* __restrict__ ci,
                                           const int* __restrict__ diag, const double* __restrict__ lu,
                                           const double* rhs, double* pend) {
    w.i = i;
    w.b = UPPER ? diag[i] + 1 : rp[i];
    w.e = UPPER ? rp[i + 1] : diag[i];
    w.s = rhs[i];
    w.d = UPPER ? lu[w.b - 1] : 1.0;
#pragma unroll
    for (int j = 0; j < SWEEP_REG; ++j) {
        if (w.b + j < w.e) {
            w.k[j] = ci[w.b + j];
            w.l[j] = lu[w.b + j];
        }
    }
    pend[i] = __longlong_as_double(ILU_PENDING);
}

// x_k for a dependency: from the chunk's shared copy (an earlier level), or
// from an earlier chunk once computed.
__device__ __forceinline__ double sweep_x(int k, int lo, int hi, const double* xs, const double* x) {
    return (k >= lo && k < hi) ? xs[k - lo] : await_global(&x[k]);
}

// A computed value as stored: one with the pending bits becomes the canonical NaN.
__device__ __forceinline__ double settled(double s) {
    return pending(s) ? __longlong_as_double(0x7ff8000000000000LL) : s;
}

// Makes x_i visible to the other blocks' polls.
__device__ __forceinline__ void publish(double* x, int i, double s) {
    asm volatile("st.relaxed.gpu.global.f64 [%0], %1;" ::"l"(&x[i]), "d"(s) : "memory");
}

template <bool UPPER>
__device__ __forceinline__ void sweep_finish(const SweepRow& w, int lo, int hi, const int* __restrict__ ci,
                                             const double* __restrict__ lu, double* xs, double* x) {
    double xv[SWEEP_REG];
#pragma unroll
    for (int j = 0; j < SWEEP_REG; ++j)  // every load issued before the first is used
        if (w.b + j < w.e) xv[j] = sweep_x(w.k[j], lo, hi, xs, x);
    double s = w.s;
#pragma unroll
    for (int j = 0; j < SWEEP_REG; ++j)
        if (w.b + j < w.e) s -= w.l[j] * xv[j];
    for (int kk = w.b + SWEEP_REG; kk < w.e; ++kk) s -= lu[kk] * sweep_x(ci[kk], lo, hi, xs, x);
    if (UPPER) s /= w.d;
    s = settled(s);
    xs[w.i - lo] = s;
    publish(x, w.i, s);
}

// rhs: r (lower) or y (upper); x: y (lower) or z (upper); pend: z (lower)
// or y (upper). Chunk c's levels are chunk_level[c] .. chunk_level[c+1] of
// level_ptr, which says where each starts in `order`.
template <bool UPPER>
__device__ void sweep_syncfree(int n, int chunk, const int* __restrict__ chunk_level,
                               const int* __restrict__ level_ptr, const int* __restrict__ order,
                               const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag,
                               const double* __restrict__ lu, const double* rhs, double* x, double* pend,
                               unsigned int* ctl, const double* sc) {
    extern __shared__ double xs[];
    __shared__ int c;
    if (stopped(sc)) return;
    if (threadIdx.x == 0) c = (int)atomicAdd(&ctl[0], 1u);
    __syncthreads();
    // chunk c holds rows [lo, hi), counted from the end for the upper sweep
    const int lo = UPPER ? max(n - (c + 1) * chunk, 0) : c * chunk;
    const int hi = UPPER ? n - c * chunk : min(lo + chunk, n);
    const int lev0 = chunk_level[c], lev1 = chunk_level[c + 1];
    SweepRow w;
    bool have = lev0 < lev1 && level_ptr[lev0] + (int)threadIdx.x < level_ptr[lev0 + 1];
    if (have) sweep_load<UPPER>(w, order[level_ptr[lev0] + threadIdx.x], rp, ci, diag, lu, rhs, pend);
    for (int lev = lev0; lev < lev1; ++lev) {
        const int first = level_ptr[lev], last = level_ptr[lev + 1];
        if (have) sweep_finish<UPPER>(w, lo, hi, ci, lu, xs, x);
        for (int t = first + blockDim.x + threadIdx.x; t < last; t += blockDim.x) {  // levels wider than the block
            SweepRow v;
            sweep_load<UPPER>(v, order[t], rp, ci, diag, lu, rhs, pend);
            sweep_finish<UPPER>(v, lo, hi, ci, lu, xs, x);
        }
        // the next level's row, loaded while the block meets at the barrier
        have = lev + 1 < lev1 && last + (int)threadIdx.x < level_ptr[lev + 2];
        if (have) sweep_load<UPPER>(w, order[last + threadIdx.x], rp, ci, diag, lu, rhs, pend);
        __syncthreads();
    }
    sweep_rearm(ctl);
}

// Forward substitution with the unit lower factor: y_i = r_i - sum_{j<i} l_ij y_j.
extern "C" __global__ void __launch_bounds__(512) lsolve_syncfree(int n, int chunk, const int* chunk_level,
    const int* level_ptr, const int* order, const int* rp, const int* ci, const int* diag, const double* lu,
    const double* r, double* y, double* z, unsigned int* ctl, const double* sc) {
    if constexpr (WANTED(lsolve_syncfree)) {
        sweep_syncfree<false>(n, chunk, chunk_level, level_ptr, order, rp, ci, diag, lu, r, y, z, ctl, sc);
    }
}

// Back substitution with the upper factor: z_i = (y_i - sum_{j>i} u_ij z_j) / u_ii.
extern "C" __global__ void __launch_bounds__(512) usolve_syncfree(int n, int chunk, const int* chunk_level,
    const int* level_ptr, const int* order, const int* rp, const int* ci, const int* diag, const double* lu,
    double* y, double* z, unsigned int* ctl, const double* sc) {
    if constexpr (WANTED(usolve_syncfree)) {
        sweep_syncfree<true>(n, chunk, chunk_level, level_ptr, order, rp, ci, diag, lu, y, z, y, ctl, sc);
    }
}

// ---- ILU(0) triangular solves of a stencil on a box: the grid walk ----
//
// Where the rows are the points of an nx x ny x nz box numbered x fastest
// and a row reads, in its own z-plane, only earlier points of its line or
// points of the previous line (sparse::grid_walk checks this on the host),
// a block walks one z-plane (planes in ticket order, as the chunks above)
// and a thread one x-line: thread j takes point i = s - skew j at step s,
// a barrier between steps. A neighbour in the plane was computed at an
// earlier step and is read from shared memory, which keeps the last
// GRID_RING points of each line; a neighbour in an earlier plane is polled
// in global memory as by the chunks, its load issued with the row's (a
// step ahead; two on 7-point-class stencils, whose rows fit three in
// registers). A plane runs a hand-off behind the previous one instead of a
// hand-off behind at every level: nx + skew (ny - 1) steps a plane plus nz
// hand-offs, against nx + ny + nz levels with a hand-off at each. The upper
// sweep walks the box from its last point (walk index w = n - 1 - row).
//
// The walk reads the factors in its own layout, gathered after each
// factorisation (sparse::grid_walk::GridWalk::layout): the sweep's stencil
// as k distances in walk index (in the rows' CSR order) with each one's
// line and point step in the plane (the ring's slot without a division), a
// bit per entry a point has (`mask`), the entries by distance then point
// (vals[e n + w]) and, upper, U's diagonal after them. So a row's loads
// wait on nothing (no row pointers, no columns), its neighbours' addresses
// are known in advance, and each line's data GRID_AHEAD steps on is
// fetched into L1 as it goes. Same sums in the same order as every other
// schedule, so the same bits; the same pending protocol, so the schedules
// may follow one another on the same vectors.
#define GRID_RING 8
#define GRID_AHEAD 4

template <int K>
struct GridRow {
    int w, row;
    unsigned int m;
    double s, d;
    double v[K];
    double g[K];  // neighbours in earlier planes, loaded a step ahead (pending if not there yet)
};

#define GRID_EARLIER (-2147483647 - 1)  // an entry's line step where it lies in an earlier plane

template <bool UPPER, int K>
__device__ void sweep_grid(int n, int nx, int ny, int skew, int k, const int* __restrict__ stencil,
                           const unsigned int* __restrict__ mask, const double* __restrict__ vals,
                           const double* rhs, double* x, double* pend, unsigned int* ctl, const double* sc) {
    extern __shared__ double ring[];  // ring[GRID_RING j + i % GRID_RING]: point i of line j
    __shared__ int plane, off[K], dj[K], di[K];  // stencil: k distances, then their line and point steps
    if (stopped(sc)) return;
    if (threadIdx.x == 0) plane = (int)atomicAdd(&ctl[0], 1u);
    if (threadIdx.x < K) {
        const bool used = threadIdx.x < k;
        off[threadIdx.x] = used ? stencil[threadIdx.x] : 0;
        dj[threadIdx.x] = used ? stencil[k + threadIdx.x] : 0;
        di[threadIdx.x] = used ? stencil[2 * k + threadIdx.x] : 0;
    }
    __syncthreads();
    const int base = plane * nx * ny, j = threadIdx.x, steps = nx + skew * (ny - 1), first = base + j * nx;
    auto row_of = [n](int w) { return UPPER ? n - 1 - w : w; };  // walk index <-> row (its own inverse)
    auto load = [&](GridRow<K>& r, int s) {
        const int i = s - skew * j;
        if (j >= ny || i < 0 || i >= nx) return false;
        r.w = first + i;
        r.row = row_of(r.w);
        r.m = mask[r.w];
        r.s = rhs[r.row];
        if (UPPER) r.d = vals[(i64)k * n + r.w];
#pragma unroll
        for (int e = 0; e < K; ++e) {
            if (!((r.m >> e) & 1u)) continue;
            r.v[e] = vals[(i64)e * n + r.w];
            if (dj[e] == GRID_EARLIER)
                r.g[e] = ld_relaxed(&x[row_of(r.w - off[e])]);
        }
        pend[r.row] = __longlong_as_double(ILU_PENDING);  // after rhs is read: pend may be rhs
        return true;
    };
    auto prefetch = [](const void* a) { asm volatile("prefetch.global.L1 [%0];" ::"l"(a)); };
    auto compute = [&](int s, const GridRow<K>& cur) {
        const int i = s - skew * j;
        const int ahead = first + min(i + GRID_AHEAD, nx - 1);
        prefetch(&mask[ahead]);
        prefetch(&rhs[row_of(ahead)]);
        for (int e = 0; e < k + UPPER; ++e) prefetch(&vals[(i64)e * n + ahead]);
        double v = cur.s;
#pragma unroll
        for (int e = 0; e < K; ++e) {
            if (!((cur.m >> e) & 1u)) continue;
            double xc;
            if (dj[e] != GRID_EARLIER) {
                xc = ring[GRID_RING * (j + dj[e]) + ((i + di[e]) & (GRID_RING - 1))];
            } else {
                xc = pending(cur.g[e]) ? await_global(&x[row_of(cur.w - off[e])]) : cur.g[e];
            }
            v -= cur.v[e] * xc;
        }
        if (UPPER) v /= cur.d;
        v = settled(v);
        ring[GRID_RING * j + (i & (GRID_RING - 1))] = v;
        publish(x, cur.row, v);
    };
    if (K <= 4) {
        // three rows in turn, each loaded two steps before it is computed
        // (the plane before's values too), none copied while loads are in flight
        GridRow<K> a, b, c;
        bool ha = load(a, 0), hb = load(b, 1), hc = false;
        for (int s = 0; s < steps; s += 3) {
            hc = load(c, s + 2);
            if (ha) compute(s, a);
            __syncthreads();
            if (s + 1 >= steps) break;
            ha = load(a, s + 3);
            if (hb) compute(s + 1, b);
            __syncthreads();
            if (s + 2 >= steps) break;
            hb = load(b, s + 4);
            if (hc) compute(s + 2, c);
            __syncthreads();
        }
    } else {
        // wide stencils: a row loaded a step ahead (registers for three would spill)
        GridRow<K> cur, next;
        bool have = load(cur, 0);
        for (int s = 0; s < steps; ++s) {
            if (have) compute(s, cur);
            const bool more = load(next, s + 1);
            __syncthreads();
            cur = next;
            have = more;
        }
    }
    sweep_rearm(ctl);
}

#define GRID_SWEEPS(K)                                                                                            \
    extern "C" __global__ void __launch_bounds__(512) lsolve_grid##K(int n, int nx, int ny, int skew, int k,       \
        const int* stencil, const unsigned int* mask, const double* vals, const double* r, double* y, double* z,  \
        unsigned int* ctl, const double* sc) {                                                                     \
        if constexpr (WANTED(lsolve_grid##K)) {                                                                     \
            sweep_grid<false, K>(n, nx, ny, skew, k, stencil, mask, vals, r, y, z, ctl, sc);                        \
        }                                                                                                           \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(512) usolve_grid##K(int n, int nx, int ny, int skew, int k,       \
        const int* stencil, const unsigned int* mask, const double* vals, double* y, double* z,                  \
        unsigned int* ctl, const double* sc) {                                                                     \
        if constexpr (WANTED(usolve_grid##K)) {                                                                     \
            sweep_grid<true, K>(n, nx, ny, skew, k, stencil, mask, vals, y, z, y, ctl, sc);                         \
        }                                                                                                           \
    }
GRID_SWEEPS(4)
GRID_SWEEPS(16)

// ---- ILU(0) triangular solves of a 7-point stencil: the plane pipeline ----
//
// Where each triangle reads at most the point before on its line, the line
// before and the plane before (sparse::grid_walk::GridWalk::pipeline), a
// block walks P consecutive planes of the box, a thread an x-line of each,
// plane q of the block a step behind plane q - 1 (its values through shared
// memory); the first plane of a block polls the block before's last plane
// in global memory (the block before's slot of `hand`), its values loaded a
// step ahead, once that plane has begun. The measured costs that shaped it (H100, BENCHMARKS.md "The plane
// pipeline"): a step is bound by one warp's chain of dependent
// instructions, so the step carries no address arithmetic beyond one
// index, found when its loads are issued,
// and every load is issued PIPE_LEAD steps ahead by cp.async into shared
// memory (register loads share the warp's six scoreboards, which cut their
// lead to a step or two); a hand-off between blocks costs a global round
// trip, so P planes a block cut them P-fold (3 measured fastest at 128³).
//
// The factors and the vectors between the sweeps are stored plane by plane,
// step by step (the lines a step holds, in order), so a step's loads are
// contiguous; the upper sweep's order is the lower's reversed, so it reads
// y where the lower sweep stored it. Each entry is a kind (0: the point
// before on the line, 1: the line before, 2: the plane before; upper: 3: U's
// diagonal, 4: its reciprocal, for `quotient`), an absent one the pending
// bits. Same sums in the same order as every other schedule (the rows' CSR
// order), and quotients correctly rounded, so the same bits. (The four
// entries of a point side by side, copied 16 bytes at a time, measured
// slower: 0.65 against 0.51 ms an apply.)
//
// Windows (`plan` = {window, runs, planes a run}, picked on the device
// after each factorisation by pipe_window_pick; both sweeps' orders
// alike): a run's blocks compute its planes and, before them, `window`
// planes of the run before from zero values (the plane before its first
// one taken as zero). The error that leaves shrinks by pipe_window_pick's
// gamma a plane, so the window is chosen where gamma^window is below 2^-56
// of the largest value: the same numbers to rounding, not the same bits.
// window < 0: one run, every plane, the exact schedule. Tickets go round
// the runs, so a block's predecessor (ticket - runs) always started first.
// A block hands its last plane to the next block of its run through its
// own slot of `hand` (area values, each its own completion flag, marked
// pending again by its one reader).
//
// lower: rhs = r (rows), out = y (steps); upper: rhs = y (steps, reversed),
// out = z (rows). Only a plane's owner writes out.
#define PIPE_LEAD 6
#define PIPE_THREADS 512

// v / d from d and its correctly rounded reciprocal rd (Markstein's final
// correction: q0 = v rd, the remainder v - q0 d exact by FMA, q0 + rem rd):
// the correctly rounded quotient, the bits of v / d for normal operands, in
// three dependent operations where the division takes about ten.
__device__ __forceinline__ double quotient(double v, double d, double rd) {
    const double q0 = v * rd;
    return fma(fma(-q0, d, v), rd, q0);
}

template <bool UPPER>
__device__ void sweep_pipe(int n, int nx, int ny, int lines, const int* __restrict__ plan,
                           const int* __restrict__ step_off, const double* __restrict__ vals, const double* rhs,
                           double* out, double* hand, unsigned int* ctl, const double* sc) {
    constexpr int A = UPPER ? 6 : 4;                 // staged a point: its entries (upper: d, 1 / d), then the right-hand side
    extern __shared__ double stage[];               // stage[(u A + a) T + t], then the step offsets
    __shared__ double ring[2][PIPE_THREADS + 1];     // [step parity][1 + thread]: each thread's last value
    __shared__ int ticket;
    if (stopped(sc)) return;
    const int T = blockDim.x, t = threadIdx.x, P = T / lines, q = t / lines, j = t - q * lines;
    const int area = nx * ny, S = nx + ny - 1, nz = n / area;
    int* off = (int*)(stage + PIPE_LEAD * A * T);
    for (int k = t; k <= S; k += T) off[k] = step_off[k];
    if (t == 0) ticket = (int)atomicAdd(&ctl[0], 1u);
    __syncthreads();
    const int w = plan[0], C = w < 0 ? 1 : plan[1], run = ticket % C;
    const int own0 = w < 0 ? 0 : run * plan[2], own1 = w < 0 ? nz : min(nz, own0 + plan[2]);
    const int first = max(0, own0 - max(w, 0)), top = first + ticket / C * P;  // the run's first plane, the block's
    if (top >= own1) {  // past its run's end: nothing to do
        sweep_rearm(ctl);
        return;
    }
    const int plane = top + q, pbase = plane * area;
    const bool live = plane < own1 && j < ny, owner = plane >= own0;
    // the plane before a block's first: the block before's slot; its own last plane's slot, where a block follows
    const double* before = hand + (i64)(ticket - C) * area;
    double* handed = q == P - 1 && plane + 1 < own1 ? hand + (i64)ticket * area : nullptr;
    // each staged step's point: its place (-1: none at that step), found once when its loads are issued
    int at[PIPE_LEAD];
    auto load = [&](int u, int s) {
        const int sp = s - q;
        at[u] = -1;
        if (live && (unsigned)(sp - j) < (unsigned)nx) {
            const int k = pbase + off[sp] + j - max(0, sp - nx + 1);
            double* d = stage + u * A * T + t;
#pragma unroll
            for (int a = 0; a < A - 1; ++a) cp_async8(d + a * T, &vals[(i64)a * n + k]);
            cp_async8(d + (A - 1) * T, UPPER ? &rhs[n - 1 - k] : &rhs[pbase + j * (nx - 1) + sp]);
            at[u] = k;
        }
        cp_commit();
    };
    const bool polls = q == 0 && top > first;  // the plane before is the block before's
    double back_ahead[PIPE_LEAD];  // the plane before's values (first plane of a block), loaded a step ahead
    auto load_back = [&](int u) {
        if (polls && at[u] >= 0) back_ahead[u] = ld_relaxed(&before[at[u] - pbase]);
    };
#pragma unroll
    for (int u = 0; u < PIPE_LEAD; ++u) load(u, u);
    // a block's threads poll once the plane before has begun (waiting for it
    // to be 1-3 steps on measured slower, 0.51 -> 0.52-0.55 ms an apply)
    if (t == 0 && top > first) (void)await_global(&before[0]);
    __syncthreads();
    load_back(0);
    double left = 0.0;
    const int steps = S + P - 1;
    for (int s0 = 0; s0 < steps; s0 += PIPE_LEAD) {  // PIPE_LEAD even: step s's parity is u's
#pragma unroll
        for (int u = 0; u < PIPE_LEAD; ++u) {
            const int k = at[u];
            cp_wait<PIPE_LEAD - 1>();
            if (k >= 0) {
                const double* d = stage + u * A * T + t;
                const double f_left = d[0], f_down = d[T], f_back = d[2 * T];
                const double down = ring[(u + 1) & 1][t];  // thread t - 1's, a step ago
                // a run's first plane takes the plane before as zero (a window's start)
                const bool backed = !pending(f_back) && plane > first;
                double back = 0.0;
                if (backed) {
                    if (q > 0) {
                        back = ring[(u + 1) & 1][1 + t - lines];
                    } else {
                        double* b = const_cast<double*>(&before[k - pbase]);
                        back = pending(back_ahead[u]) ? await_global(b) : back_ahead[u];
                        *b = __longlong_as_double(ILU_PENDING);  // read: pending for the next apply
                    }
                }
                double v = d[(A - 1) * T];
                if (UPPER) {
                    if (!pending(f_left)) v -= f_left * left;
                    if (!pending(f_down)) v -= f_down * down;
                    if (backed) v -= f_back * back;
                    v = quotient(v, d[3 * T], d[4 * T]);
                } else {
                    if (backed) v -= f_back * back;
                    if (!pending(f_down)) v -= f_down * down;
                    if (!pending(f_left)) v -= f_left * left;
                }
                v = settled(v);
                ring[u & 1][1 + t] = v;
                left = v;
                if (handed) publish(handed, k - pbase, v);
                if (owner) {
                    if (UPPER) out[n - 1 - (pbase + j * (nx - 1) + s0 + u - q)] = v;
                    else out[k] = v;
                }
            }
            load_back((u + 1) % PIPE_LEAD);
            load(u, s0 + u + PIPE_LEAD);
            __syncthreads();
        }
    }
    cp_wait<0>();
    sweep_rearm(ctl);
}

extern "C" __global__ void __launch_bounds__(PIPE_THREADS) lsolve_pipe(int n, int nx, int ny, int lines,
    const int* plan, const int* step_off, const double* vals, const double* r, double* y, double* hand,
    unsigned int* ctl, const double* sc) {
    if constexpr (WANTED(lsolve_pipe)) {
        sweep_pipe<false>(n, nx, ny, lines, plan, step_off, vals, r, y, hand, ctl, sc);
    }
}

extern "C" __global__ void __launch_bounds__(PIPE_THREADS) usolve_pipe(int n, int nx, int ny, int lines,
    const int* plan, const int* step_off, const double* vals, const double* y, double* z, double* hand,
    unsigned int* ctl, const double* sc) {
    if constexpr (WANTED(usolve_pipe)) {
        sweep_pipe<true>(n, nx, ny, lines, plan, step_off, vals, y, z, hand, ctl, sc);
    }
}

// The windows' bound after a factorisation: over the sweep's points, the
// largest |entry of the plane before| (b) and |point before| + |line before|
// (a), upper ones over U's diagonal, as the bits of non-negative doubles
// (ordered as integers; NaN above all).
extern "C" __global__ void __launch_bounds__(256) pipe_window_bound(int n, int upper, const double* __restrict__ vals,
    unsigned long long* most_ab) {
    if constexpr (WANTED(pipe_window_bound)) {
        unsigned long long a_bits = 0, b_bits = 0;
        GRID_STRIDE(i, n) {
            auto mag = [&](int kind) {
                const double v = vals[(i64)kind * n + i];
                return pending(v) ? 0.0 : fabs(v);
            };
            const double scale = upper ? mag(4) : 1.0;
            a_bits = max(a_bits, (unsigned long long)__double_as_longlong((mag(0) + mag(1)) * scale));
            b_bits = max(b_bits, (unsigned long long)__double_as_longlong(mag(2) * scale));
        }
        atomicMax(&most_ab[0], a_bits);
        atomicMax(&most_ab[1], b_bits);
    }
}

// Then one thread picks the sweep's plan {window, runs, planes a run}. The
// error a plane passes on is at most gamma = b / (1 - a) of the one before's
// (the plane's own entries sum to a < 1), so a window of
// ceil(log 2^-56 / log gamma) planes leaves less than 2^-56 of the largest
// value. Runs: `runs` where the caller fixed them, else the most (up to
// `most_runs`) whose blocks fit `budget` (more queue for multiprocessors:
// measured slower). {-1, 1, nz} (the exact schedule) where gamma is not
// below 1, the window passes `most_window`, or one run is all that fits.
extern "C" __global__ void pipe_window_pick(unsigned long long* most_ab, int nz, int planes, int runs, int most_runs,
    int budget, int most_window, int* plan) {
    if constexpr (WANTED(pipe_window_pick)) {
        const double a = __longlong_as_double((long long)most_ab[0]), b = __longlong_as_double((long long)most_ab[1]);
        const double gamma = b / (1.0 - a);
        int w = -1, c = 1;
        if (b == 0.0) w = 0;
        else if (a < 1.0 && gamma < 1.0) {
            const double window = ceil(-56.0 * 0.6931471805599453 / log(gamma));
            if (window <= (double)most_window) w = (int)window;
        }
        if (w >= 0 && runs > 0) c = runs;
        for (int r = most_runs; w >= 0 && runs == 0 && r >= 2; --r) {
            if (r * (((nz + r - 1) / r + w + planes - 1) / planes) <= budget) {
                c = r;
                break;
            }
        }
        plan[0] = c > 1 ? w : -1;
        plan[1] = c;
        plan[2] = (nz + c - 1) / c;
        most_ab[0] = 0;
        most_ab[1] = 0;
    }
}

// vals[i] = lu[from[i]] (from `reciprocals` on: 1 / lu[from[i]], U's
// diagonal for quotient), or the pending bits where from[i] < 0 (an entry a point lacks).
extern "C" __global__ void __launch_bounds__(256) pipe_gather(i64 m, i64 reciprocals, const int* __restrict__ from,
    const double* __restrict__ lu, double* __restrict__ vals) {
    if constexpr (WANTED(pipe_gather)) {
        GRID_STRIDE(i, m) {
            const double v = from[i] < 0 ? __longlong_as_double(ILU_PENDING) : lu[from[i]];
            vals[i] = i >= reciprocals && from[i] >= 0 ? 1.0 / v : v;
        }
    }
}

// ---- CG's q = A p fused with p.q (device-driven iterations) ----

// CG: q = A p fused with PQ = p.q (not positive: breakdown), TPR lanes per
// row as in spmv. Grid-stride over the rows a warp at a time, so the grid
// fits the reduction's partials and every lane of a warp reaches the shuffles.
// With `own_total` (a distributed matrix's diagonal block), p.q over these
// rows goes there instead, for spmv_rows_add_pq to finish.
// Rows longer than long_len: q there was computed before (spmv_long_rows),
// and is only read for p.q.
template <int TPR>
__device__ void spmv_pq(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                        const double* __restrict__ p, double* __restrict__ q, double* partial, unsigned int* counter,
                        double* sc, double* own_total, int long_len) {
    if (stopped(sc)) return;
    const int per_warp = 32 / TPR, lane = threadIdx.x & (TPR - 1), group = (threadIdx.x & 31) / TPR;
    const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    double dot = 0.0;
    for (i64 first = warp * per_warp; first < n; first += warps * per_warp) {
        const i64 row = first + group;
        const bool mine = row < n && rp[row + 1] - rp[row] <= long_len;
        const double sum = row_times<TPR>(mine ? row : n, n, lane, rp, ci, v, p);
        if (row < n && lane == 0) {
            if (mine) q[row] = sum;
            dot += p[row] * (mine ? sum : q[row]);
        }
    }
    double pq, unused;
    if (last_block_sums(block_sum(dot), 0.0, partial, counter, pq, unused)) {
        if (own_total) *own_total = pq;
        else set_pq(sc, pq);
    }
}

// y[rows[q]] += (A x)_q over the listed rows only, a thread a row: the halo
// block of a distributed matrix, whose few rows with entries would otherwise
// cost a pass over the whole of y (each row summed in order, as spmv with TPR 1).
extern "C" __global__ void __launch_bounds__(256) spmv_rows_add(int m, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
    const double* __restrict__ x, double* y, const double* sc) {
    if constexpr (WANTED(spmv_rows_add)) {
        if (stopped(sc)) return;
        GRID_STRIDE(q, m) {
            double s = 0.0;
            for (int k = rp[q]; k < rp[q + 1]; ++k) s += v[k] * x[ci[k]];
            y[rows[q]] += s;
        }
    }
}

// A distributed CG's q = A p, second half: q[rows[k]] += (H x_halo)_k over
// the halo block's rows with entries (as spmv_rows_add), their share of p.q
// added to the diagonal block's (*own_total, from spmv_pq), then summed over
// the team's ranks into PQ. m = 0 (a rank without halo) only finishes p.q.
extern "C" __global__ void __launch_bounds__(256) spmv_rows_add_pq(int m, const int* __restrict__ rows,
    const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
    const double* __restrict__ x, const double* __restrict__ p, double* q, const double* own_total, double* partial,
    unsigned int* counter, double* sc) {
    if constexpr (WANTED(spmv_rows_add_pq)) {
        if (stopped(sc)) return;
        double dot = 0.0;
        GRID_STRIDE(k, m) {
            double s = 0.0;
            for (int e = rp[k]; e < rp[k + 1]; ++e) s += v[e] * x[ci[e]];
            const int r = rows[k];
            q[r] += s;
            dot += p[r] * s;
        }
        double sum = block_sum(dot);
        if (blockIdx.x == 0 && threadIdx.x == 0) sum += *own_total;
        double pq, unused;
        if (iteration_sums(sum, 0.0, partial, counter, sc, pq, unused)) {
            set_pq(sc, pq);
        }
    }
}

// CG: PQ = p.q after a separate q = A p (long rows, where the fused form
// above measured slower: BENCHMARKS.md); not positive: breakdown.
#define SPMV_PQ(TPR)                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) spmv_pq_tpr##TPR(int n, const int* rp, const int* ci,     \
        const double* v, const double* p, double* q, double* partial, unsigned int* counter, double* sc,       \
        double* own_total, int long_len) {                                                                     \
        if constexpr (WANTED(spmv_pq_tpr##TPR)) {                                                                \
            spmv_pq<TPR>(n, rp, ci, v, p, q, partial, counter, sc, own_total, long_len);                         \
        }                                                                                                        \
    }
SPMV_PQ(1) SPMV_PQ(2)
