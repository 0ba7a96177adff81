// Block CSR (BSR) kernels: SpMV, block Jacobi, block ILU(0) level by level.
// Blocks are K x K, column-major: entry (i, j) of block s at v[(s K + j) K + i];
// the pattern is over block rows (int32, 0-based). Each kernel runs the sums
// of the CPU reference (src/sparse/block/cpu.rs) in the same order, so the
// two agree to rounding. (kernels/common.cuh and csr.cuh are prepended.)

// c = a b.
template <int K>
__device__ __forceinline__ void mat_mul(const double* a, const double* b, double* c) {
#pragma unroll
    for (int j = 0; j < K; ++j)
#pragma unroll
        for (int i = 0; i < K; ++i) {
            double s = 0.0;
#pragma unroll
            for (int l = 0; l < K; ++l) s += a[l * K + i] * b[j * K + l];
            c[j * K + i] = s;
        }
}

// inv = m^-1 by Gauss-Jordan with partial pivoting (m destroyed); false when a
// pivot is zero or the inverse is not finite.
template <int K>
__device__ bool invert(double* m, double* inv) {
    for (int j = 0; j < K; ++j)
        for (int i = 0; i < K; ++i) inv[j * K + i] = i == j ? 1.0 : 0.0;
    for (int c = 0; c < K; ++c) {
        int p = c;
        for (int r = c + 1; r < K; ++r)
            if (fabs(m[c * K + r]) > fabs(m[c * K + p])) p = r;
        const double best = fabs(m[c * K + p]);
        if (isnan(best) || best == 0.0) return false;
        if (p != c)
            for (int j = 0; j < K; ++j) {
                double t = m[j * K + c];
                m[j * K + c] = m[j * K + p];
                m[j * K + p] = t;
                t = inv[j * K + c];
                inv[j * K + c] = inv[j * K + p];
                inv[j * K + p] = t;
            }
        const double d = 1.0 / m[c * K + c];
        for (int j = 0; j < K; ++j) {
            m[j * K + c] *= d;
            inv[j * K + c] *= d;
        }
        for (int r = 0; r < K; ++r) {
            const double f = m[c * K + r];
            if (r != c && f != 0.0)
                for (int j = 0; j < K; ++j) {
                    m[j * K + r] -= f * m[j * K + c];
                    inv[j * K + r] -= f * inv[j * K + c];
                }
        }
    }
    for (int t = 0; t < K * K; ++t)
        if (!isfinite(inv[t])) return false;
    return true;
}

// y = alpha A x + beta y, TPR lanes per block row, each lane taking every
// TPR-th block (so a group reads consecutive blocks), the K row sums reduced
// across the group. With beta == 0, y is not read. `sc`: as spmv's.
template <int K, int TPR>
__device__ void bsr_spmv(int nb, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                         const double* __restrict__ x, double* __restrict__ y, double alpha, double beta,
                         const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    double sum[K];
#pragma unroll
    for (int i = 0; i < K; ++i) sum[i] = 0.0;
    if (row < nb) {
        const int e = rp[row + 1];
        for (int s = rp[row] + lane; s < e; s += TPR) {
            double xb[K];
            const i64 c = (i64)ci[s] * K;
#pragma unroll
            for (int j = 0; j < K; ++j) xb[j] = __ldg(&x[c + j]);
            add_mat_vec<K>(v + (i64)s * K * K, xb, sum, 1.0);
        }
    }
#pragma unroll
    for (int i = 0; i < K; ++i) sum[i] = group_sum<TPR>(sum[i]);
    if (row < nb && lane == 0)
#pragma unroll
        for (int i = 0; i < K; ++i) {
            const i64 r = row * K + i;
            y[r] = beta == 0.0 ? alpha * sum[i] : alpha * sum[i] + beta * y[r];
        }
}

// The inverse of each diagonal block into inv (block Jacobi), one thread per
// block row; a singular block records its row in *bad (smallest wins).
template <int K>
__device__ void bsr_diag_inverse(int nb, const int* __restrict__ diag, const double* __restrict__ v,
                                 double* __restrict__ inv, int* bad) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nb) return;
    double m[K * K];
    const double* d = v + (i64)diag[r] * K * K;
    for (int t = 0; t < K * K; ++t) m[t] = d[t];
    if (!invert<K>(m, inv + (i64)r * K * K)) atomicMin(bad, r);
}

// z = D^-1 r, one thread per block row.
template <int K>
__device__ void bsr_jacobi(int nb, const double* __restrict__ inv, const double* __restrict__ r,
                           double* __restrict__ z, const double* sc) {
    const i64 b = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb || stopped(sc)) return;
    double acc[K], rb[K];
#pragma unroll
    for (int i = 0; i < K; ++i) {
        acc[i] = 0.0;
        rb[i] = r[b * K + i];
    }
    add_mat_vec<K>(inv + b * K * K, rb, acc, 1.0);
#pragma unroll
    for (int i = 0; i < K; ++i) z[b * K + i] = acc[i];
}

// Block ILU(0), one level of block rows, one thread a row, the CPU
// reference's IKJ update: L_ik = A_ik U_kk^-1, A_ij -= L_ik U_kj, then the
// pivot block inverted in place. A singular pivot records its row in *bad.
template <int K>
__device__ void bilu0_level(int count, const int* __restrict__ rows, const int* __restrict__ rp,
                            const int* __restrict__ ci, const int* __restrict__ diag, double* lu, int* bad) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const int i = rows[t];
    const int ei = rp[i + 1];
    double l[K * K], prod[K * K];
    for (int s = rp[i]; s < diag[i]; ++s) {
        const int c = ci[s], dc = diag[c];
        mat_mul<K>(lu + (i64)s * K * K, lu + (i64)dc * K * K, l);
        for (int q = 0; q < K * K; ++q) lu[(i64)s * K * K + q] = l[q];
        int jj = s + 1, q = dc + 1;
        const int ec = rp[c + 1];
        while (jj < ei && q < ec) {
            const int cj = ci[jj], cq = ci[q];
            if (cj == cq) {
                mat_mul<K>(l, lu + (i64)q * K * K, prod);
                for (int u = 0; u < K * K; ++u) lu[(i64)jj * K * K + u] -= prod[u];
                ++jj;
                ++q;
            } else if (cj < cq) {
                ++jj;
            } else {
                ++q;
            }
        }
    }
    double m[K * K];
    double* d = lu + (i64)diag[i] * K * K;
    for (int u = 0; u < K * K; ++u) m[u] = d[u];
    if (!invert<K>(m, d)) atomicMin(bad, i);
}

// One block row of a triangular solve with the block factors. Lower: out_i =
// rhs_i - sum_{k<i} L_ik in_k. Upper: out_i = U_ii^-1 (rhs_i - sum_{j>i} U_ij in_j).
// The level kernels solve in place (in == out: a level reads only rows of
// earlier levels, written by earlier launches); the Jacobi sweeps of
// Precond::Ilu0Jacobi read one vector and write another, so no row waits on another.
template <int K, bool UPPER>
__device__ __forceinline__ void bilu0_row(int i, const int* __restrict__ rp, const int* __restrict__ ci,
                                          const int* __restrict__ diag, const double* __restrict__ lu,
                                          const double* rhs, const double* in, double* out) {
    double acc[K];
#pragma unroll
    for (int u = 0; u < K; ++u) acc[u] = rhs[(i64)i * K + u];
    const int b = UPPER ? diag[i] + 1 : rp[i], e = UPPER ? rp[i + 1] : diag[i];
    for (int s = b; s < e; ++s) {
        double xb[K];
#pragma unroll
        for (int u = 0; u < K; ++u) xb[u] = __ldg(&in[(i64)ci[s] * K + u]);
        add_mat_vec<K>(lu + (i64)s * K * K, xb, acc, -1.0);
    }
    if (UPPER) {
        double o[K];
#pragma unroll
        for (int u = 0; u < K; ++u) o[u] = 0.0;
        add_mat_vec<K>(lu + (i64)diag[i] * K * K, acc, o, 1.0);
#pragma unroll
        for (int u = 0; u < K; ++u) acc[u] = o[u];
    }
#pragma unroll
    for (int u = 0; u < K; ++u) out[(i64)i * K + u] = acc[u];
}

// Forward substitution, one level: y_i = r_i - sum_{k<i} L_ik y_k.
template <int K>
__device__ void bilu0_lower(int count, const int* __restrict__ rows, const int* rp, const int* ci, const int* diag,
                            const double* lu, const double* r, double* y, const double* sc) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count || stopped(sc)) return;
    bilu0_row<K, false>(rows[t], rp, ci, diag, lu, r, y, y);
}

// Back substitution, one level, in place: x_i = U_ii^-1 (y_i - sum_{j>i} U_ij x_j).
template <int K>
__device__ void bilu0_upper(int count, const int* __restrict__ rows, const int* rp, const int* ci, const int* diag,
                            const double* lu, double* x, const double* sc) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count || stopped(sc)) return;
    bilu0_row<K, true>(rows[t], rp, ci, diag, lu, x, x, x);
}

// One Jacobi sweep of a block triangle over every block row: lower, out = y -
// L_s in; upper, out = U_d^-1 (y - U_s in).
template <int K>
__device__ void bilu0_sweep(int nb, const int* rp, const int* ci, const int* diag, const double* lu, const double* y,
                            const double* in, int upper, double* out, const double* sc) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nb || stopped(sc)) return;
    if (upper)
        bilu0_row<K, true>(i, rp, ci, diag, lu, y, in, out);
    else
        bilu0_row<K, false>(i, rp, ci, diag, lu, y, in, out);
}

// out_i = U_ii^-1 y_i: the upper sweeps' starting guess.
template <int K>
__device__ void bilu0_diag(int nb, const int* __restrict__ diag, const double* __restrict__ lu,
                           const double* __restrict__ y, double* __restrict__ out, const double* sc) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nb || stopped(sc)) return;
    double yb[K], o[K];
#pragma unroll
    for (int u = 0; u < K; ++u) {
        yb[u] = y[(i64)i * K + u];
        o[u] = 0.0;
    }
    add_mat_vec<K>(lu + (i64)diag[i] * K * K, yb, o, 1.0);
#pragma unroll
    for (int u = 0; u < K; ++u) out[(i64)i * K + u] = o[u];
}

#define BSR_SPMV(K, TPR)                                                                                        \
    extern "C" __global__ void __launch_bounds__(256) bsr_spmv_k##K##_tpr##TPR(int nb, const int* rp,           \
        const int* ci, const double* v, const double* x, double* y, double alpha, double beta, const double* sc) { \
        if constexpr (WANTED(bsr_spmv_k##K##_tpr##TPR)) bsr_spmv<K, TPR>(nb, rp, ci, v, x, y, alpha, beta, sc); \
    }
#define BSR_KERNELS(K)                                                                                          \
    BSR_SPMV(K, 1) BSR_SPMV(K, 2) BSR_SPMV(K, 4) BSR_SPMV(K, 8)                                                 \
    extern "C" __global__ void __launch_bounds__(128) bsr_diag_inverse_k##K(int nb, const int* diag,            \
        const double* v, double* inv, int* bad) {                                                               \
        if constexpr (WANTED(bsr_diag_inverse_k##K)) bsr_diag_inverse<K>(nb, diag, v, inv, bad);                \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) bsr_jacobi_k##K(int nb, const double* inv,                \
        const double* r, double* z, const double* sc) {                                                         \
        if constexpr (WANTED(bsr_jacobi_k##K)) bsr_jacobi<K>(nb, inv, r, z, sc);                                \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) bilu0_level_k##K(int count, const int* rows,              \
        const int* rp, const int* ci, const int* diag, double* lu, int* bad) {                                  \
        if constexpr (WANTED(bilu0_level_k##K)) bilu0_level<K>(count, rows, rp, ci, diag, lu, bad);             \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) bilu0_lower_k##K(int count, const int* rows,              \
        const int* rp, const int* ci, const int* diag, const double* lu, const double* r, double* y,            \
        const double* sc) {                                                                                     \
        if constexpr (WANTED(bilu0_lower_k##K)) bilu0_lower<K>(count, rows, rp, ci, diag, lu, r, y, sc);        \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) bilu0_upper_k##K(int count, const int* rows,              \
        const int* rp, const int* ci, const int* diag, const double* lu, double* x, const double* sc) {         \
        if constexpr (WANTED(bilu0_upper_k##K)) bilu0_upper<K>(count, rows, rp, ci, diag, lu, x, sc);           \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) bilu0_sweep_k##K(int nb, const int* rp, const int* ci,    \
        const int* diag, const double* lu, const double* y, const double* in, int upper, double* out,           \
        const double* sc) {                                                                                     \
        if constexpr (WANTED(bilu0_sweep_k##K)) bilu0_sweep<K>(nb, rp, ci, diag, lu, y, in, upper, out, sc);    \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) bilu0_diag_k##K(int nb, const int* diag, const double* lu, \
        const double* y, double* out, const double* sc) {                                                       \
        if constexpr (WANTED(bilu0_diag_k##K)) bilu0_diag<K>(nb, diag, lu, y, out, sc);                         \
    }
BSR_KERNELS(2) BSR_KERNELS(3) BSR_KERNELS(4) BSR_KERNELS(5) BSR_KERNELS(6) BSR_KERNELS(7) BSR_KERNELS(8)
