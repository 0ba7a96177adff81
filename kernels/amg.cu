// The AMG V-cycle's own kernels (src/amg/cuda.rs); restriction and
// prolongation are sparse.cu's SpMV (spmv_f32 for f32 values). One
// thread group of TPR lanes per row, as SpMV. `sc` (may be null): the solver
// scalars of a device-driven iteration; every kernel does nothing once they
// say stop. The cycle's kernels come twice: V = double, and V = float for a
// cycle over f32 copies of its matrices' values (Options::f32_cycle; the
// vectors and sums stay double). (kernels/common.cuh and csr.cuh are prepended.)

// One smoothing step: d = c1 d + c2 inv (b - A x_in); x_out = x_in + d, with
// (c1, c2) = coef[2 step], coef[2 step + 1]. x_in == null: the first step from
// x = 0 (no product, d not read). x_in and x_out are different buffers.
template <int TPR, typename V>
__device__ void smooth(int n, const int* __restrict__ rp, const int* __restrict__ ci, const V* __restrict__ v,
                       const double* __restrict__ inv, const double* __restrict__ b, const double* __restrict__ x_in,
                       double* __restrict__ x_out, double* __restrict__ d, const double* __restrict__ coef, int step,
                       const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const double ax = x_in ? row_times<TPR>(row, n, lane, rp, ci, v, x_in) : 0.0;
    if (row >= n || lane != 0) return;
    const double c1 = coef[2 * step], c2 = coef[2 * step + 1];
    double di = c2 * inv[row] * (b[row] - ax);
    if (c1 != 0.0) di += c1 * d[row];
    d[row] = di;
    x_out[row] = (x_in ? x_in[row] : 0.0) + di;
}

// r = b - A x.
template <int TPR, typename V>
__device__ void residual(int n, const int* __restrict__ rp, const int* __restrict__ ci, const V* __restrict__ v,
                         const double* __restrict__ b, const double* __restrict__ x, double* __restrict__ r,
                         const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const double ax = row_times<TPR>(row, n, lane, rp, ci, v, x);
    if (row < n && lane == 0) r[row] = b[row] - ax;
}

#define AMG(TPR, V, SUFFIX)                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) amg_smooth##SUFFIX##_tpr##TPR(int n, const int* rp,             \
        const int* ci, const V* v, const double* inv, const double* b, const double* x_in, double* x_out, double* d,  \
        const double* coef, int step, const double* sc) {                                                             \
        smooth<TPR, V>(n, rp, ci, v, inv, b, x_in, x_out, d, coef, step, sc);                                         \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(256) amg_residual##SUFFIX##_tpr##TPR(int n, const int* rp,           \
        const int* ci, const V* v, const double* b, const double* x, double* r, const double* sc) {                   \
        residual<TPR, V>(n, rp, ci, v, b, x, r, sc);                                                                  \
    }
AMG(1, double, ) AMG(2, double, ) AMG(4, double, ) AMG(8, double, ) AMG(16, double, ) AMG(32, double, )
AMG(1, float, _f32) AMG(2, float, _f32) AMG(4, float, _f32) AMG(8, float, _f32) AMG(16, float, _f32) AMG(32, float, _f32)

// dst = src rounded to f32 (the cycle's copies of the values). With `first`
// (the finest values: src/amg/setup.rs check_finest's f32 check), *first =
// the first nonzero value that f32 cannot hold as a normal number.
extern "C" __global__ void __launch_bounds__(256) amg_round_to_f32(i64 n, const double* __restrict__ src,
                                                                   float* __restrict__ dst, int* first) {
    GRID_STRIDE(i, n) {
        const float s = (float)src[i];
        dst[i] = s;
        if (first && src[i] != 0.0 && !(fabsf(s) >= 1.17549435e-38f && fabsf(s) <= 3.40282347e38f)) atomicMin(first, (int)i);
    }
}

// The coarsest solve x = inv b with the dense inverse (row-major n x n),
// a warp per row, the row's sum in a fixed order.
extern "C" __global__ void __launch_bounds__(256) amg_dense(int n, const double* __restrict__ inv,
    const double* __restrict__ b, double* __restrict__ x, const double* sc) {
    if (stopped(sc)) return;
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (row >= n) return;
    double s = 0.0;
    for (int j = lane; j < n; j += 32) s += inv[(i64)row * n + j] * b[j];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) x[row] = s;
}

// ---- The values-only re-setup on the device (src/amg/cuda.rs `refresh`):
// the same numbers as src/amg/setup.rs `numbers`, on the kept patterns.

// dinv[i] = 1 / a_ii, 0 where the diagonal is 0 or missing (diag[i] < 0:
// rows left empty by dropped null-space columns); with `bad`, *bad = the
// first row whose diagonal is 0, missing or not finite (INT_MAX: none).
extern "C" __global__ void __launch_bounds__(256) amg_inverse_diagonal(int n, const int* __restrict__ diag,
    const double* __restrict__ v, double* __restrict__ dinv, int* bad) {
    GRID_STRIDE(i, n) {
        const double d = diag[i] < 0 ? 0.0 : v[diag[i]];
        if (bad && (d == 0.0 || !isfinite(d))) atomicMin(bad, (int)i);
        dinv[i] = d == 0.0 ? 0.0 : 1.0 / d;
    }
}

// Per row, s = sum_j |a_ij|; out = (s == 0 ? 0 : 1 / s) (l1-Jacobi's
// scaling), or with `scale`: out = |scale_i| s (Gershgorin's row bounds).
extern "C" __global__ void __launch_bounds__(256) amg_row_sums(int n, const int* __restrict__ rp,
    const double* __restrict__ v, const double* __restrict__ scale, double* __restrict__ out) {
    GRID_STRIDE(i, n) {
        double s = 0.0;
        for (int k = rp[i]; k < rp[i + 1]; ++k) s += fabs(v[k]);
        out[i] = scale ? fabs(scale[i]) * s : (s == 0.0 ? 0.0 : 1.0 / s);
    }
}

// Lanczos on S A S (s = sqrt(|dinv|)) with its scalars left
// on the device, so the steps queue without a host read between them:
// t[0] = |start|^2, then step k's alpha at t[2k + 1] and |w|^2 (its beta
// squared) at t[2k + 2]; amg_level_numbers turns them into rho on the
// device (src/amg/host.rs spectral_radius_symmetric, step for step). The
// sums end as kernels/common.cuh last_block_sums, launched on Reduce::blocks(n).

// Entry i of Lanczos' fixed start vector, in [0.5, 1.5): splitmix64 of i
// to 53 bits (src/amg/host.rs lanczos_entry, bit for bit).
__device__ double lanczos_entry(i64 i) {
    unsigned long long z = (unsigned long long)(i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 + 0.5;
}

// The per-entry arithmetic of the start, a step's row and its beta, shared
// by the launched steps and amg_lanczos_block (the host's order, host.rs
// spectral_radius_symmetric, so rho has its bits).

// Entry i of the start: w = the start vector where s = sqrt|dinv| > 0, 0
// elsewhere, sw = s w (the next product's operand); returns w_i^2.
__device__ __forceinline__ double lanczos_start_entry(i64 i, const double* dinv, double* w, double* sw) {
    const double s = sqrt(fabs(dinv[i])), x = s == 0.0 ? 0.0 : lanczos_entry(i);
    w[i] = x;
    sw[i] = s * x;
    return x * x;
}

// Entry j of v = w / b (b = sqrt(t[at]); 0 once the norm is 0, and after a
// breakdown, a tiny beta the host discards, where it is not finite).
__device__ __forceinline__ double lanczos_v(const double* w, double b, i64 j) {
    const double x = b > 0.0 ? w[j] / b : 0.0;
    return isfinite(x) ? x : 0.0;
}

// Row `row` of a step after its product y = (A (s w))_row: v = w / b,
// w_out = s y / b - b prev (not when first; 0 where not finite); returns
// w_out_row v_row, the row's share of alpha.
__device__ __forceinline__ double lanczos_row(i64 row, double y, double b, bool first, const double* dinv,
    const double* w, const double* prev, double* v, double* w_out) {
    const double vi = lanczos_v(w, b, row), s = sqrt(fabs(dinv[row])), ys = (b > 0.0 ? y / b : 0.0) * s;
    double x = first ? ys : ys - b * prev[row];
    x = isfinite(x) ? x : 0.0;
    v[row] = vi;
    w_out[row] = x;
    return x * vi;
}

// Entry i of a step's beta: w -= alpha v, sw = s w; returns w_i^2.
__device__ __forceinline__ double lanczos_beta_entry(i64 i, double alpha, const double* dinv, double* w,
    const double* v, double* sw) {
    const double x = w[i] - alpha * v[i];
    w[i] = x;
    sw[i] = sqrt(fabs(dinv[i])) * x;
    return x * x;
}

// The start (lanczos_start_entry) over every entry; t[0] = |w|^2.
extern "C" __global__ void __launch_bounds__(256) amg_lanczos_start(int n, const double* __restrict__ dinv,
    double* __restrict__ w, double* __restrict__ sw, double* t, double* partial, unsigned int* counter) {
    double sum = 0.0;
    GRID_STRIDE(i, n) sum += lanczos_start_entry(i, dinv, w, sw);
    double t1, t2;
    if (last_block_sums(block_sum(sum), 0.0, partial, counter, t1, t2)) t[0] = t1;
}

// One Lanczos step's product with its first sum, TPR lanes a row: v = w / b
// (b = sqrt(t[norm_at]); written), w_out = s (A (s v)) - b prev (none when
// first), alpha = w_out . v into t[alpha_at]. The operand s v is sw / b
// (amg_lanczos_beta's sw = s w): the row's sum is divided once, so the step
// takes two launches (this and amg_lanczos_beta) over w and w_out in turn.
// A value that is not finite (after a breakdown the host discards) is 0.
template <int TPR>
__device__ void lanczos_product(int n, const int* __restrict__ rp, const int* __restrict__ ci,
    const double* __restrict__ a, const double* __restrict__ dinv, const double* __restrict__ sw,
    const double* __restrict__ w, double* __restrict__ w_out, double* __restrict__ v, const double* __restrict__ prev,
    double* t, int norm_at, int first, int alpha_at, double* partial, unsigned int* counter) {
    const double b = sqrt(t[norm_at]);
    const int lane = threadIdx.x & (TPR - 1);
    const i64 groups = ((i64)gridDim.x * blockDim.x) / TPR;
    // the warp's first row: its lanes loop together (the group sums shuffle)
    i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    i64 warp_row = ((i64)blockIdx.x * blockDim.x + (threadIdx.x & ~31)) / TPR;
    double dot = 0.0;
    for (; warp_row < n; row += groups, warp_row += groups) {
        double y = 0.0;
        if (row < n)
            for (int k = rp[row] + lane; k < rp[row + 1]; k += TPR) y += a[k] * __ldg(&sw[ci[k]]);
        y = group_sum<TPR>(y);
        if (lane == 0 && row < n) dot += lanczos_row(row, y, b, first, dinv, w, prev, v, w_out);
    }
    double t1, t2;
    if (last_block_sums(block_sum(dot), 0.0, partial, counter, t1, t2)) t[alpha_at] = t1;
}

#define LANCZOS_PRODUCT(TPR)                                                                                          \
    extern "C" __global__ void __launch_bounds__(256) amg_lanczos_product_tpr##TPR(int n, const int* __restrict__ rp, \
        const int* __restrict__ ci, const double* __restrict__ a, const double* __restrict__ dinv,                    \
        const double* __restrict__ sw, const double* __restrict__ w, double* __restrict__ w_out,                      \
        double* __restrict__ v, const double* __restrict__ prev, double* t, int norm_at, int first, int alpha_at,     \
        double* partial, unsigned int* counter) {                                                                     \
        lanczos_product<TPR>(n, rp, ci, a, dinv, sw, w, w_out, v, prev, t, norm_at, first, alpha_at, partial,         \
                             counter);                                                                                \
    }
LANCZOS_PRODUCT(1) LANCZOS_PRODUCT(2) LANCZOS_PRODUCT(4) LANCZOS_PRODUCT(8) LANCZOS_PRODUCT(16) LANCZOS_PRODUCT(32)

// w -= alpha v (alpha = t[alpha_at]), sw = s w; |w|^2 into t[alpha_at + 1].
extern "C" __global__ void __launch_bounds__(256) amg_lanczos_beta(int n, const double* __restrict__ dinv,
    double* __restrict__ w, const double* __restrict__ v, double* __restrict__ sw, double* t, int alpha_at,
    double* partial, unsigned int* counter) {
    const double alpha = t[alpha_at];
    double sum = 0.0;
    GRID_STRIDE(i, n) sum += lanczos_beta_entry(i, alpha, dinv, w, v, sw);
    double t1, t2;
    if (last_block_sums(block_sum(sum), 0.0, partial, counter, t1, t2)) t[alpha_at + 1] = t1;
}

// The same Lanczos for a small level (src/amg/cuda.rs LANCZOS_BLOCK_ROWS):
// the start and every step in one block, the block's barriers between
// them instead of launches, each step's sums by the block: amg_lanczos_start,
// then per step amg_lanczos_product's v, w_out and alpha and amg_lanczos_beta's
// w_out, sw and |w_out|^2, over v and prev, w and w_out in turn. (No
// __restrict__ or __ldg on the vectors: the block writes them between reads.)
extern "C" __global__ void __launch_bounds__(1024) amg_lanczos_block(int n, int steps, const int* __restrict__ rp,
    const int* __restrict__ ci, const double* __restrict__ a, const double* __restrict__ dinv, double* v,
    double* prev, double* w, double* w_out, double* sw, double* t) {
    double sum = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += lanczos_start_entry(i, dinv, w, sw);
    sum = block_sum(sum);
    if (threadIdx.x == 0) t[0] = sum;
    __syncthreads();
    for (int k = 0; k < steps; ++k) {
        const double b = sqrt(t[2 * k]);
        double dot = 0.0;
        for (int row = threadIdx.x; row < n; row += blockDim.x) {
            double y = 0.0;
            for (int q = rp[row]; q < rp[row + 1]; ++q) y += a[q] * sw[ci[q]];
            dot += lanczos_row(row, y, b, k == 0, dinv, w, prev, v, w_out);
        }
        dot = block_sum(dot);
        if (threadIdx.x == 0) t[2 * k + 1] = dot;
        __syncthreads();
        const double alpha = t[2 * k + 1];
        double norm = 0.0;
        for (int i = threadIdx.x; i < n; i += blockDim.x) norm += lanczos_beta_entry(i, alpha, dinv, w_out, v, sw);
        norm = block_sum(norm);
        if (threadIdx.x == 0) t[2 * k + 2] = norm;
        __syncthreads();
        double* const swap_v = v;
        v = prev;
        prev = swap_v;
        double* const swap_w = w;
        w = w_out;
        w_out = swap_w;
    }
}

// The count of eigenvalues of the symmetric tridiagonal matrix (sign
// alpha, beta), m x m, below x: its negative pivots (src/amg/host.rs
// tridiagonal_max `below`, the same operations in the same order).
__device__ int eigenvalues_below(int m, const double* alpha, const double* beta, double sign, double x) {
    int below = 0;
    double d = 1.0;
    for (int i = 0; i < m; ++i) {
        const double shifted = sign * alpha[i] - x;
        // (2.2250738585072014e-308: f64::MIN_POSITIVE)
        d = i > 0 ? shifted - __dmul_rn(beta[i - 1], beta[i - 1]) / (d == 0.0 ? 2.2250738585072014e-308 : d) : shifted;
        below += d < 0.0;
    }
    return below;
}

// The levels of bisection a warp takes per round: its lanes count at every
// midpoint of that many levels ahead (2^5 - 1 = 31 of them).
#define BISECTION_LEVELS 5

// The largest eigenvalue of that matrix: host.rs tridiagonal_max's
// bisection from Gershgorin's interval, the same midpoints and the same
// stop, BISECTION_LEVELS steps a round: lane j (heap order, node j of the
// steps' tree, the bits of j + 1 below its leading one its path, 1 the
// upper half) counts at its node's midpoint, then every lane walks the
// path the counts choose. Called by a whole warp; every lane returns it.
__device__ double tridiagonal_max(int m, const double* alpha, const double* beta, double sign) {
    double lo = 1.7976931348623157e308, hi = -1.7976931348623157e308;  // f64::MAX, f64::MIN
    for (int i = 0; i < m; ++i) {
        const double r = (i > 0 ? fabs(beta[i - 1]) : 0.0) + (i < m - 1 ? fabs(beta[i]) : 0.0);
        lo = fmin(lo, sign * alpha[i] - r);
        hi = fmax(hi, sign * alpha[i] + r);
    }
    const int lane = threadIdx.x & 31, node = lane + 1, depth = 31 - __clz(node);
    for (int it = 0;;) {
        double l = lo, h = hi;
        for (int d = depth - 1; d >= 0; --d) {
            const double mid = 0.5 * (l + h);
            if ((node >> d) & 1) l = mid;
            else h = mid;
        }
        const int up = lane < 31 && eigenvalues_below(m, alpha, beta, sign, 0.5 * (l + h)) < m;
        for (int d = 0, at = 0; d < BISECTION_LEVELS; ++d) {
            const int upper = __shfl_sync(0xffffffffu, up, at);
            const double mid = 0.5 * (lo + hi);
            if (upper) lo = mid;
            else hi = mid;
            if (hi - lo <= 1e-12 * fabs(hi) || ++it == 100) return hi;
            at = 2 * at + 1 + upper;
        }
    }
}

#define LANCZOS_MAX 32

// A level's numbers from rho(D^-1 A), on the device so the re-setup queues
// without a host read (src/amg/setup.rs refresh): rho from Lanczos' scalars
// t (`steps` of them; none: rho = `given`), as src/amg/cuda.rs did on the
// host (it stops at the first tiny beta); scalars = (rho, omega = 4 / (3 rho));
// a Chebyshev smoother of `degree` steps (0: another smoother, its table
// left as it is) writes its (c1, c2) per step into coef (setup.rs coefficients,
// `top` and `ratio` its CHEBYSHEV_TOP and _RATIO). Two warps: the largest
// eigenvalue of the Lanczos matrix and of its negative, one each.
extern "C" __global__ void __launch_bounds__(64) amg_level_numbers(int steps, const double* __restrict__ t,
    double given, int degree, double top, double ratio, double* __restrict__ scalars, double* __restrict__ coef) {
    __shared__ double alpha[LANCZOS_MAX], beta[LANCZOS_MAX], extreme[2];
    __shared__ int m;
    if (threadIdx.x == 0) {
        m = 0;
        for (int k = 0; steps > 0 && t[0] != 0.0 && k < steps && k < LANCZOS_MAX; ++k) {
            const double a = t[2 * k + 1], b = sqrt(t[2 * k + 2]);
            alpha[m++] = a;
            if (b <= 1e-12 * fmax(fabs(a), 1e-300)) break;
            beta[m - 1] = b;
        }
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5;
    if (m > 0 && warp < 2) {
        const double e = tridiagonal_max(m, alpha, beta, warp == 0 ? 1.0 : -1.0);
        if ((threadIdx.x & 31) == 0) extreme[warp] = e;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    const double rho = steps <= 0 ? given : m == 0 ? 0.0 : fmax(fabs(extreme[0]), fabs(extreme[1]));
    scalars[0] = rho;
    scalars[1] = rho > 0.0 ? 4.0 / (3.0 * rho) : 0.0;
    if (degree <= 0) return;
    const double hi = top * rho, lo = top * rho / ratio;
    const double centre = (hi + lo) / 2.0, half = (hi - lo) / 2.0, sigma = centre / half;
    coef[0] = 0.0;
    coef[1] = 1.0 / centre;
    double rho_prev = 1.0 / sigma;
    for (int s = 1; s < degree; ++s) {
        const double rho_k = 1.0 / (__dmul_rn(2.0, sigma) - rho_prev);
        coef[2 * s] = __dmul_rn(rho_k, rho_prev);
        coef[2 * s + 1] = __dmul_rn(2.0, rho_k) / half;
        rho_prev = rho_k;
    }
}

// Where column `col` sits among a row's sorted columns cci[begin..end) (it is there).
__device__ __forceinline__ int find_column(const int* __restrict__ cci, int begin, int end, int col) {
    int lo = begin, hi = end - 1;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (cci[mid] < col) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// C's values = A B on C's kept pattern (sorted columns), a group of G lanes
// per row of C (G about B's row length): A's entries in order, the group's
// lanes over B's row, each product added where a binary search finds its
// column. Within one entry of A the lanes write distinct columns, and
// __syncwarp orders the entries, so every sum runs in the host's order
// (src/amg/host.rs product_values) without atomics.
template <int G>
__device__ __forceinline__ void product_row(int row, int lane, unsigned group, const int* __restrict__ arp,
                                            const int* __restrict__ aci, const double* __restrict__ av,
                                            const int* __restrict__ brp, const int* __restrict__ bci,
                                            const double* __restrict__ bv, const int* __restrict__ crp,
                                            const int* __restrict__ cci, double* cv) {
    const int c0 = crp[row], c1 = crp[row + 1];
    for (int k = c0 + lane; k < c1; k += G) cv[k] = 0.0;
    if (G > 1) __syncwarp(group);
    for (int ka = arp[row]; ka < arp[row + 1]; ++ka) {
        const double aik = av[ka];
        const int r = aci[ka];
        for (int kb = brp[r] + lane; kb < brp[r + 1]; kb += G) {
            cv[find_column(cci, c0, c1, bci[kb])] += aik * bv[kb];
        }
        if (G > 1) __syncwarp(group);
    }
}

// The group's lanes: G consecutive lanes of the warp.
template <int G>
__device__ __forceinline__ unsigned group_mask() {
    return G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x & 31 & ~(G - 1));
}

template <int G>
__device__ void product(int n, const int* __restrict__ arp, const int* __restrict__ aci, const double* __restrict__ av,
                        const int* __restrict__ brp, const int* __restrict__ bci, const double* __restrict__ bv,
                        const int* __restrict__ crp, const int* __restrict__ cci, double* cv) {
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    if (row >= n) return;
    product_row<G>((int)row, threadIdx.x & (G - 1), group_mask<G>(), arp, aci, av, brp, bci, bv, crp, cci, cv);
}

// The same over blocks of S consecutive rows (a node's dofs, an aggregate's
// modes), n / S of them. Where a block's rows share one column pattern in A
// and one in C (`alike`: src/amg/host.rs row_blocks), B's entries and their
// search serve its S rows at once: S times fewer loads of B, which bound
// the row product. Other blocks (a clamped node's rows) go row by row.
// Each sum still runs in the host's order.
template <int G, int S>
__device__ void block_product(int blocks, const unsigned char* __restrict__ alike, const int* __restrict__ arp,
                              const int* __restrict__ aci, const double* __restrict__ av, const int* __restrict__ brp,
                              const int* __restrict__ bci, const double* __restrict__ bv, const int* __restrict__ crp,
                              const int* __restrict__ cci, double* cv) {
    const i64 block = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int lane = threadIdx.x & (G - 1);
    const unsigned group = group_mask<G>();
    if (block >= blocks) return;
    const int row = (int)block * S;
    if (!alike[block]) {
        for (int s = 0; s < S; ++s) product_row<G>(row + s, lane, group, arp, aci, av, brp, bci, bv, crp, cci, cv);
        return;
    }
    // the S rows are consecutive, each as long as the first: row s at s * length
    const int a0 = arp[row], a_len = arp[row + 1] - a0, c0 = crp[row], c_len = crp[row + 1] - c0;
    for (int k = c0 + lane; k < c0 + S * c_len; k += G) cv[k] = 0.0;
    if (G > 1) __syncwarp(group);
    for (int t = 0; t < a_len; ++t) {
        double a[S];
#pragma unroll
        for (int s = 0; s < S; ++s) a[s] = av[a0 + s * a_len + t];
        const int r = aci[a0 + t];
        for (int kb = brp[r] + lane; kb < brp[r + 1]; kb += G) {
            const int lo = find_column(cci, c0, c0 + c_len, bci[kb]);
            // the S sums loaded together, then stored: one latency, not S in a row
            const double b = bv[kb];
            double c[S];
#pragma unroll
            for (int s = 0; s < S; ++s) c[s] = cv[lo + s * c_len];
#pragma unroll
            for (int s = 0; s < S; ++s) cv[lo + s * c_len] = c[s] + a[s] * b;
        }
        if (G > 1) __syncwarp(group);
    }
}

// The same for few rows of C whose rows of A are long (a coarse level's
// R (A P): a few thousand rows of C, hundreds of R's entries each, which a
// group a row would walk one after another): a block a row of C, each warp
// over its slice of A's row (consecutive entries, in order), summing a
// partial row of C in shared memory as product_row does (C's columns staged
// there too); then each entry of C is its warps' partial sums, in warp
// order. `width`: C's longest row, the partial rows' stride; the launch
// gives warps x width doubles and width ints of shared memory.
extern "C" __global__ void __launch_bounds__(1024) amg_product_split(int n, int width, const int* __restrict__ arp,
    const int* __restrict__ aci, const double* __restrict__ av, const int* __restrict__ brp,
    const int* __restrict__ bci, const double* __restrict__ bv, const int* __restrict__ crp,
    const int* __restrict__ cci, double* __restrict__ cv) {
    extern __shared__ double partial_rows[];
    const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    double* part = partial_rows + warp * width;
    int* cols = (int*)(partial_rows + warps * width);
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const int c0 = crp[row], len = crp[row + 1] - c0;
        for (int k = threadIdx.x; k < len; k += blockDim.x) cols[k] = cci[c0 + k];
        for (int k = lane; k < len; k += 32) part[k] = 0.0;
        __syncthreads();
        const int a0 = arp[row], a_len = arp[row + 1] - a0, per = (a_len + warps - 1) / warps;
        const int end = a0 + min(a_len, (warp + 1) * per);
        for (int ka = a0 + min(a_len, warp * per); ka < end; ++ka) {
            const double aik = av[ka];
            const int r = aci[ka];
            for (int kb = brp[r] + lane; kb < brp[r + 1]; kb += 32) part[find_column(cols, 0, len, bci[kb])] += aik * bv[kb];
            __syncwarp();
        }
        __syncthreads();
        for (int k = threadIdx.x; k < len; k += blockDim.x) {
            double sum = 0.0;
            for (int w = 0; w < warps; ++w) sum += partial_rows[w * width + k];
            cv[c0 + k] = sum;
        }
        __syncthreads();
    }
}

// The same over dense tiles, where A, B and C are block matrices stored as
// CSR: A's rows in blocks of S alike, each row's columns in aligned runs of
// K; B's rows in blocks of K alike, their columns in aligned runs of J; C
// likewise (src/amg/host.rs tiles checks it). A warp per block of S rows
// of C and a lane per S x J tile of C, summed in registers: each lane goes
// over A's tiles of the row in order, finds its tile's column among the
// tiles of the row of B that A's tile points to (a binary search over that
// row's tile starts) and adds the S x K by K x J product where it is there.
// Each sum runs in the host's order; each lane writes its own tile, once.
// A's tile columns and B's row extents are loaded by the warp's lanes
// together, then shuffled. Launched in blocks of 128 threads.
template <int S, int K, int J>
__device__ void tile_product(int blocks, const int* __restrict__ arp, const int* __restrict__ aci,
                             const double* __restrict__ av, const int* __restrict__ brp, const int* __restrict__ bci,
                             const double* __restrict__ bv, const int* __restrict__ crp, const int* __restrict__ cci,
                             double* cv) {
    const i64 block = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (block >= blocks) return;  // the whole warp
    const int row = (int)block * S;
    const int a0 = arp[row], a_len = arp[row + 1] - a0, c0 = crp[row], c_len = crp[row + 1] - c0;
    const int a_tiles = a_len / K, c_tiles = c_len / J;
    for (int base = 0; base < c_tiles; base += 32) {
        const bool mine = base + lane < c_tiles;
        const int col = mine ? cci[c0 + (base + lane) * J] : -1;
        double c[S][J];
#pragma unroll
        for (int s = 0; s < S; ++s)
#pragma unroll
            for (int j = 0; j < J; ++j) c[s][j] = 0.0;
        for (int chunk = 0; chunk < a_tiles; chunk += 32) {
            // lane t: A's tile chunk + t, its column and the extent of B's row there
            int b0 = 0, b_len = 0;
            if (chunk + lane < a_tiles) {
                const int r = aci[a0 + (chunk + lane) * K];
                b0 = brp[r];
                b_len = brp[r + 1] - b0;
            }
            const int count = min(32, a_tiles - chunk);
            for (int t = 0; t < count; ++t) {
                const int tb0 = __shfl_sync(0xffffffffu, b0, t), tb_len = __shfl_sync(0xffffffffu, b_len, t);
                if (!mine) continue;
                int lo = 0, hi = tb_len / J;
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if (bci[tb0 + mid * J] < col) lo = mid + 1;
                    else hi = mid;
                }
                if (lo == tb_len / J || bci[tb0 + lo * J] != col) continue;
                const int at = tb0 + lo * J, ta = a0 + (chunk + t) * K;
                double a[S][K], b[K][J];
#pragma unroll
                for (int s = 0; s < S; ++s)
#pragma unroll
                    for (int k = 0; k < K; ++k) a[s][k] = av[ta + s * a_len + k];
#pragma unroll
                for (int k = 0; k < K; ++k)
#pragma unroll
                    for (int j = 0; j < J; ++j) b[k][j] = bv[at + k * tb_len + j];
#pragma unroll
                for (int s = 0; s < S; ++s)
#pragma unroll
                    for (int j = 0; j < J; ++j)
#pragma unroll
                        for (int k = 0; k < K; ++k) c[s][j] += a[s][k] * b[k][j];
            }
        }
        if (mine) {
#pragma unroll
            for (int s = 0; s < S; ++s)
#pragma unroll
                for (int j = 0; j < J; ++j) cv[c0 + s * c_len + (base + lane) * J + j] = c[s][j];
        }
    }
}

#define TILE_PRODUCT(S, K, J)                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) amg_product_t##S##x##K##x##J(int blocks, const int* arp,    \
        const int* aci, const double* av, const int* brp, const int* bci, const double* bv, const int* crp,        \
        const int* cci, double* cv) {                                                                              \
        tile_product<S, K, J>(blocks, arp, aci, av, brp, bci, bv, crp, cci, cv);                                   \
    }
TILE_PRODUCT(6, 6, 6) TILE_PRODUCT(6, 3, 6) TILE_PRODUCT(3, 3, 6)

#define PRODUCT(G)                                                                                                \
    extern "C" __global__ void __launch_bounds__(256) amg_product_g##G(int n, const int* arp, const int* aci,     \
        const double* av, const int* brp, const int* bci, const double* bv, const int* crp, const int* cci,        \
        double* cv) {                                                                                              \
        product<G>(n, arp, aci, av, brp, bci, bv, crp, cci, cv);                                                   \
    }                                                                                                             \
    BLOCK_PRODUCT(G, 2) BLOCK_PRODUCT(G, 3) BLOCK_PRODUCT(G, 4)
#define BLOCK_PRODUCT(G, S)                                                                                       \
    extern "C" __global__ void __launch_bounds__(256) amg_product_g##G##_s##S(int blocks,                         \
        const unsigned char* alike, const int* arp, const int* aci, const double* av, const int* brp,              \
        const int* bci, const double* bv, const int* crp, const int* cci, double* cv) {                            \
        block_product<G, S>(blocks, alike, arp, aci, av, brp, bci, bv, crp, cci, cv);                              \
    }
PRODUCT(1) PRODUCT(2) PRODUCT(4) PRODUCT(8) PRODUCT(16) PRODUCT(32)

// C = A T where T is a tentative prolongator: A and C tiled by S-row blocks
// (a node's rows, alike), each node's S rows of T one S x K block in its
// aggregate's K columns, or none (src/amg/host.rs tentative_tiles checks the rest).
// A warp per node, a lane per neighbour block of A (at most 32): the lane
// multiplies its S x S block by the neighbour's T block; the first lane
// holding an aggregate sums that aggregate's partial blocks in the
// neighbours' order and writes C's S x K block, so no entry is written twice
// and no atomics are needed. Launched in blocks of 128 threads.
template <int S, int K>
__device__ void times_tentative(int nodes, const int* __restrict__ arp, const int* __restrict__ aci,
                                const double* __restrict__ av, const int* __restrict__ trp,
                                const int* __restrict__ tci, const double* __restrict__ tv,
                                const int* __restrict__ crp, const int* __restrict__ cci, double* cv) {
    __shared__ double part[4][S * K][32];
    __shared__ int key[4][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i64 node = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (node >= nodes) return;  // the whole warp
    const int row = (int)node * S;
    const int a0 = arp[row], a_len = arp[row + 1] - a0, neighbours = a_len / S;
    int column = -1;  // the lane's aggregate's first column of C
    if (lane < neighbours) {
        const int j = aci[a0 + lane * S];  // the neighbour's first row of T
        if (trp[j + 1] > trp[j]) {
            column = tci[trp[j]];
            double p[S][K];
#pragma unroll
            for (int s = 0; s < S; ++s)
#pragma unroll
                for (int m = 0; m < K; ++m) p[s][m] = 0.0;
#pragma unroll
            for (int q = 0; q < S; ++q) {
                const int t0 = trp[j + q];
                double t[K];
#pragma unroll
                for (int m = 0; m < K; ++m) t[m] = tv[t0 + m];
#pragma unroll
                for (int s = 0; s < S; ++s) {
                    const double a = av[a0 + s * a_len + lane * S + q];
#pragma unroll
                    for (int m = 0; m < K; ++m) p[s][m] += a * t[m];
                }
            }
#pragma unroll
            for (int s = 0; s < S; ++s)
#pragma unroll
                for (int m = 0; m < K; ++m) part[warp][s * K + m][lane] = p[s][m];
        }
    }
    key[warp][lane] = column;
    __syncwarp();
    if (column < 0) return;
    for (int u = 0; u < lane; ++u)
        if (key[warp][u] == column) return;  // not the aggregate's first lane
    double c[S * K];
#pragma unroll
    for (int e = 0; e < S * K; ++e) c[e] = part[warp][e][lane];
    for (int u = lane + 1; u < neighbours; ++u) {
        if (key[warp][u] != column) continue;
#pragma unroll
        for (int e = 0; e < S * K; ++e) c[e] += part[warp][e][u];
    }
    const int c0 = crp[row], c_len = crp[row + 1] - c0;
    const int at = find_column(cci, c0, c0 + c_len, column);
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
        for (int m = 0; m < K; ++m) cv[at + s * c_len + m] = c[s * K + m];
}

#define TIMES_TENTATIVE(S, K)                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) amg_times_tentative_s##S##_k##K(int nodes, const int* arp,  \
        const int* aci, const double* av, const int* trp, const int* tci, const double* tv, const int* crp,        \
        const int* cci, double* cv) {                                                                              \
        times_tentative<S, K>(nodes, arp, aci, av, trp, tci, tv, crp, cci, cv);                                    \
    }
TIMES_TENTATIVE(2, 2) TIMES_TENTATIVE(2, 3) TIMES_TENTATIVE(3, 3) TIMES_TENTATIVE(3, 6)
TIMES_TENTATIVE(6, 6)

// P = T - omega D^-1 A T on A T's pattern (t_at: T's value at each entry;
// omega = scalars[1], amg_level_numbers').
extern "C" __global__ void __launch_bounds__(256) amg_prolongator(int n, const int* __restrict__ rp,
    const double* __restrict__ t_at, const double* __restrict__ at, const double* __restrict__ dinv,
    const double* __restrict__ scalars, double* __restrict__ p) {
    const double omega = scalars[1];
    GRID_STRIDE(i, n) {
        const double w = omega * dinv[i];
        for (int k = rp[i]; k < rp[i + 1]; ++k) p[k] = t_at[k] - w * at[k];
    }
}

// mirror[k]: the entry (j, i) of entry k = (i, j), by a binary search of row
// j's sorted columns; *first = the first entry whose transpose A does not
// store (the pattern is not symmetric). A warp a row.
extern "C" __global__ void __launch_bounds__(256) amg_mirror(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, int* __restrict__ mirror, int* first) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 i = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
        for (int k = rp[i] + lane; k < rp[i + 1]; k += 32) {
            const int j = ci[k], end = rp[j + 1];
            int lo = rp[j], hi = end;
            while (lo < hi) {
                const int mid = (lo + hi) >> 1;
                if (ci[mid] < i) lo = mid + 1;
                else hi = mid;
            }
            if (lo < end && ci[lo] == i) mirror[k] = lo;
            else atomicMin(first, k);
        }
    }
}

// Whether the rows come in nodes of bs equal rows whose columns run in
// aligned groups of bs (src/amg/host.rs block_pattern's test): *first = the
// first node that does not. A warp a node.
extern "C" __global__ void __launch_bounds__(256) amg_node_blocks(int nodes, int bs, const int* __restrict__ rp,
    const int* __restrict__ ci, int* first) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 node = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; node < nodes; node += warps) {
        const i64 lead = node * bs;
        const int s = rp[lead], len = rp[lead + 1] - s;
        bool ok = len % bs == 0;
        for (int t = lane; ok && t < len; t += 32) {
            const int c = ci[s + t], o = t % bs;
            ok = o == 0 ? c % bs == 0 : c == ci[s + t - o] + o;
        }
        for (int r = 1; ok && r < bs; ++r) {
            const int sr = rp[lead + r];
            ok = rp[lead + r + 1] - sr == len;
            for (int t = lane; ok && t < len; t += 32) ok = ci[sr + t] == ci[s + t];
        }
        if (!__all_sync(0xffffffffu, ok) && lane == 0) atomicMin(first, (int)node);
    }
}

// The entry pattern of a matrix of dense rows x run blocks from its block
// pattern (brp, bci over nb block rows): row i = b rows + o holds, for each
// block (b, c), the columns c run .. c run + run - 1 (src/amg/host.rs
// BlockPattern::entries). A warp a row; the caller checked that the entries
// fit an int.
extern "C" __global__ void __launch_bounds__(256) amg_expand(int nb, int rows, int run, const int* __restrict__ brp,
    const int* __restrict__ bci, int* __restrict__ rp, int* __restrict__ ci) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5, n = (i64)nb * rows;
    if (blockIdx.x == 0 && threadIdx.x == 0) rp[n] = brp[nb] * rows * run;
    for (i64 i = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
        const int b = (int)(i / rows), o = (int)(i % rows), first = brp[b], len = (brp[b + 1] - first) * run;
        const int start = first * rows * run + o * len;
        if (lane == 0) rp[i] = start;
        for (int t = lane; t < len; t += 32) ci[start + t] = bci[first + t / run] * run + t % run;
    }
}

// The warp's sum of each lane's s, in a fixed order (the same bits every run).
__device__ __forceinline__ double warp_total(double s) {
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    return s;
}

// The tentative prolongator's values (src/amg/setup.rs `tentative`), a warp
// an aggregate: its rows of the near-null space b (k vectors of n rows,
// vector j at j n; null: the constants per unknown of a node, b_j(i) =
// [i % bs == j]), each vector times scale[j] (null: 1), orthonormalised
// column by column by modified Gram-Schmidt, a column dependent on the
// earlier ones dropped to zero, in place in T's values (T written out from
// its block pattern: row i's k values at t_rp[i]); the R factor goes to the
// coarse level's near-null space (k vectors of naggs k rows: R(c, j) of
// aggregate a at j naggs k + a k + c). Aggregate a's nodes: nodes[ptr[a] ..].
extern "C" __global__ void __launch_bounds__(256) amg_fit(int naggs, int bs, int k, int n, const int* __restrict__ ptr,
    const int* __restrict__ nodes, const double* __restrict__ b, const double* __restrict__ scale,
    const int* __restrict__ t_rp, double* __restrict__ t, double* __restrict__ coarse) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5, nc = (i64)naggs * k;
    for (i64 a = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; a < naggs; a += warps) {
        const int first = ptr[a], m = (ptr[a + 1] - first) * bs;
        // row r of the aggregate is unknown i of the level, its k values at t + t_rp[i]
        auto row = [&](int r) { return nodes[first + r / bs] * bs + r % bs; };
        for (int r = lane; r < m; r += 32) {
            const int i = row(r);
            double* q = t + t_rp[i];
            for (int j = 0; j < k; ++j) q[j] = b ? b[(i64)j * n + i] * (scale ? scale[j] : 1.0) : (double)(i % bs == j);
        }
        __syncwarp();
        double* r_col = coarse + a * k;
        for (int j = 0; j < k; ++j) {
            double s = 0.0;
            for (int r = lane; r < m; r += 32) s += t[t_rp[row(r)] + j] * t[t_rp[row(r)] + j];
            const double before = sqrt(warp_total(s));
            for (int c = 0; c < j; ++c) {
                s = 0.0;
                for (int r = lane; r < m; r += 32) s += t[t_rp[row(r)] + c] * t[t_rp[row(r)] + j];
                const double dot = warp_total(s);
                if (lane == 0) r_col[(i64)j * nc + c] = dot;
                for (int r = lane; r < m; r += 32) t[t_rp[row(r)] + j] -= dot * t[t_rp[row(r)] + c];
                __syncwarp();
            }
            s = 0.0;
            for (int r = lane; r < m; r += 32) s += t[t_rp[row(r)] + j] * t[t_rp[row(r)] + j];
            const double norm = sqrt(warp_total(s));
            const bool kept = norm > 1e-10 * before && norm > 0.0;
            for (int r = lane; r < m; r += 32) {
                double* q = t + t_rp[row(r)] + j;
                *q = kept ? *q / norm : 0.0;
            }
            __syncwarp();
            for (int c = j + lane; c < k; c += 32) r_col[(i64)j * nc + c] = c == j && kept ? norm : 0.0;
        }
    }
}

// The pattern of C = A B (src/amg/host.rs product_pattern), a block of 128
// threads a row: row i's columns, the union of B's rows over A's row, set in
// a bitmap of B's ncols columns in shared memory (4 ceil(ncols / 32) bytes),
// so they come out sorted; only the words between the row's least and
// greatest column are read and cleared again (the bitmap starts zero and is
// left zero), so a row costs its own span, not ncols. A's row i is the
// first of its ra rows, every ra-th entry, each column divided by ra: A's
// node pattern (host.rs condensed; ra = 1: A's own). crp == null: out[i] =
// row i's count; else its columns go to out[crp[i] ..]. wide != null: only
// the rows i with wide[i] < 0 (those amg_product_pattern_narrow left).
extern "C" __global__ void __launch_bounds__(128) amg_product_pattern(int nrows, const int* __restrict__ wide, int ra,
    const int* __restrict__ arp, const int* __restrict__ aci, const int* __restrict__ brp, const int* __restrict__ bci,
    int ncols, const int* __restrict__ crp, int* __restrict__ out) {
    extern __shared__ unsigned int bits[];
    __shared__ int warp_counts[4], span[2];
    const int words = (ncols + 31) >> 5, t = threadIdx.x, lane = t & 31, warp = t >> 5;
    for (int w = t; w < words; w += 128) bits[w] = 0u;
    if (t == 0) span[0] = 0x7fffffff, span[1] = -1;
    __syncthreads();
    for (int i = blockIdx.x; i < nrows; i += gridDim.x) {
        if (wide && wide[i] >= 0) continue;  // the whole block alike
        int lo = 0x7fffffff, hi = -1;
        const int end = arp[(i64)i * ra + 1];
        for (int e = arp[(i64)i * ra] + t * ra; e < end; e += 128 * ra) {
            const int j = aci[e] / ra;
            for (int k = brp[j]; k < brp[j + 1]; ++k) {
                const int c = bci[k];
                atomicOr(&bits[c >> 5], 1u << (c & 31));
                lo = min(lo, c);
                hi = max(hi, c);
            }
        }
        if (hi >= 0) {
            atomicMin(&span[0], lo);
            atomicMax(&span[1], hi);
        }
        __syncthreads();
        // thread t reads its own run of the span's words, so the columns it writes follow the threads' order
        const int first = span[1] < 0 ? 0 : span[0] >> 5, last = span[1] < 0 ? -1 : span[1] >> 5;
        const int per = (last - first + 128) / 128, w0 = min(last + 1, first + t * per), w1 = min(last + 1, w0 + per);
        int mine = 0;
        for (int w = w0; w < w1; ++w) mine += __popc(bits[w]);
        int upto = mine;  // inclusive prefix over the warp
        for (int off = 1; off < 32; off <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, upto, off);
            if (lane >= off) upto += v;
        }
        if (lane == 31) warp_counts[warp] = upto;
        __syncthreads();
        int at = upto - mine, total = 0;
        for (int w = 0; w < 4; ++w) {
            at += w < warp ? warp_counts[w] : 0;
            total += warp_counts[w];
        }
        if (!crp) {
            if (t == 0) out[i] = total;
        } else {
            at += crp[i];
            for (int w = w0; w < w1; ++w)
                for (unsigned int b = bits[w]; b; b &= b - 1) out[at++] = (w << 5) + __ffs(b) - 1;
        }
        __syncthreads();  // every thread has read the span and the warps' counts
        for (int w = w0; w < w1; ++w) bits[w] = 0u;
        if (t == 0) span[0] = 0x7fffffff, span[1] = -1;
        __syncthreads();  // the bits are clear for the next row
    }
}

// The same pattern for rows of at most NARROW_COLUMNS columns (a scalar
// system's A P rows hold about ten, its R (A P) rows a few dozen), a thread
// a row: its columns kept sorted and unique in a list of its own, each
// found by bisection. A block and a bitmap a row cost the narrow rows of
// the Laplacian 128^3 about 60 ms. A row with more columns is left to
// amg_product_pattern: counted as -1 (crp == null; *any_wide = 1) and not
// written.
#define NARROW_COLUMNS 64
extern "C" __global__ void __launch_bounds__(256) amg_product_pattern_narrow(int nrows, int ra, const int* __restrict__ arp,
    const int* __restrict__ aci, const int* __restrict__ brp, const int* __restrict__ bci, const int* __restrict__ crp,
    int* __restrict__ out, int* __restrict__ any_wide) {
    int cols[NARROW_COLUMNS];
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < nrows; i += stride) {
        int m = 0;
        bool wide = false;
        const int end = arp[i * ra + 1];
        for (int e = arp[i * ra]; e < end && !wide; e += ra) {
            const int j = aci[e] / ra;
            for (int k = brp[j]; k < brp[j + 1]; ++k) {
                const int c = bci[k];
                int lo = 0, hi = m;
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if (cols[mid] < c) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < m && cols[lo] == c) continue;
                if (m == NARROW_COLUMNS) {
                    wide = true;
                    break;
                }
                for (int q = m; q > lo; --q) cols[q] = cols[q - 1];
                cols[lo] = c;
                ++m;
            }
        }
        if (!crp) {
            out[i] = wide ? -1 : m;
            if (wide) *any_wide = 1;
        } else if (!wide) {
            int* o = out + crp[i];
            for (int q = 0; q < m; ++q) o[q] = cols[q];
        }
    }
}

// out[k] = T's value at entry k of the pattern (rp, ci) of n rows, 0 where
// T stores none there (src/amg/setup.rs values_at). A warp a row; T's rows
// hold a few entries.
extern "C" __global__ void __launch_bounds__(256) amg_values_at(int n, const int* __restrict__ trp,
    const int* __restrict__ tci, const double* __restrict__ tv, const int* __restrict__ rp, const int* __restrict__ ci,
    double* __restrict__ out) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 i = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < n; i += warps) {
        for (int k = rp[i] + lane; k < rp[i + 1]; k += 32) {
            double v = 0.0;
            for (int e = trp[i]; e < trp[i + 1]; ++e)
                if (tci[e] == ci[k]) v = tv[e];
            out[k] = v;
        }
    }
}

// from[k]: the entry of P that entry k of R = P^T mirrors, R written out from
// its block pattern (rbrp, rbci; nr rows, blocks run x rows where P's are
// rows x run): R's block t = (B, I) is P's block bfrom[t] = (I, B), found in
// row I of P's block pattern (pbrp) and of its entries (prp); rrp: R's
// entries' row pointers (src/amg/host.rs Blocked::transpose). A warp a row.
extern "C" __global__ void __launch_bounds__(256) amg_transpose_from(int nr, int rows, int run,
    const int* __restrict__ rbrp, const int* __restrict__ rbci, const int* __restrict__ bfrom,
    const int* __restrict__ pbrp, const int* __restrict__ prp, const int* __restrict__ rrp, int* __restrict__ from) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 c = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nr; c += warps) {
        const int b = (int)(c / run), oc = (int)(c % run), start = rrp[c], len = rrp[c + 1] - start;
        for (int q = lane; q < len; q += 32) {
            const int t = rbrp[b] + q / rows, o = q % rows, node = rbci[t];
            from[start + q] = prp[node * rows + o] + (bfrom[t] - pbrp[node]) * run + oc;
        }
    }
}

// *first = the first entry k (in storage order) where A differs from A^T by
// more than rounding, 1e-10 of row i's largest entry (src/amg/setup.rs
// asymmetry); mirror[k]: the entry of (j, i). TPR lanes a row (the SpMV's
// for the pattern), so the row's entries and their mirrors load side by side.
template <int TPR>
__device__ void asymmetry(int n, const int* __restrict__ rp, const double* __restrict__ v,
    const int* __restrict__ mirror, int* first) {
    const int lane = threadIdx.x & (TPR - 1);
    const i64 groups = ((i64)gridDim.x * blockDim.x) / TPR;
    // the warp's first row: its lanes loop together (the shuffles)
    i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    i64 warp_row = ((i64)blockIdx.x * blockDim.x + (threadIdx.x & ~31)) / TPR;
    for (; warp_row < n; row += groups, warp_row += groups) {
        double scale = 0.0;
        if (row < n)
            for (int k = rp[row] + lane; k < rp[row + 1]; k += TPR) scale = fmax(scale, fabs(v[k]));
#pragma unroll
        for (int off = TPR / 2; off > 0; off >>= 1) scale = fmax(scale, __shfl_xor_sync(0xffffffffu, scale, off, TPR));
        if (row < n)
            for (int k = rp[row] + lane; k < rp[row + 1]; k += TPR)
                if (fabs(v[k] - v[mirror[k]]) > 1e-10 * scale) {
                    atomicMin(first, k);
                    break;
                }
    }
}

#define ASYMMETRY(TPR)                                                                                                \
    extern "C" __global__ void __launch_bounds__(256) amg_asymmetry_tpr##TPR(int n, const int* __restrict__ rp,       \
        const double* __restrict__ v, const int* __restrict__ mirror, int* first) {                                   \
        asymmetry<TPR>(n, rp, v, mirror, first);                                                                      \
    }
ASYMMETRY(1) ASYMMETRY(2) ASYMMETRY(4) ASYMMETRY(8) ASYMMETRY(16) ASYMMETRY(32)

// Symmetric Gauss-Seidel as the ILU(0) sweeps over F: a_ij / a_jj below the
// diagonal (the unit lower sweep is then (I + L D^-1)^-1 = D (D + L)^-1),
// a_ij on and above it, so the two sweeps apply (D + U)^-1 D (D + L)^-1.
// f may be a: only lower entries are written, only diagonals read across rows.
extern "C" __global__ void __launch_bounds__(256) amg_gs_factor(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const int* __restrict__ diag, const double* a, double* f) {
    GRID_STRIDE(i, n) {
        for (int k = rp[i]; k < rp[i + 1]; ++k) {
            const int j = ci[k];
            if (j < i)
                f[k] = a[k] / a[diag[j]];
            else if (f != a)
                f[k] = a[k];
        }
    }
}

// x_out = x_in + d: a Gauss-Seidel step's correction, a W-cycle's second
// visit's (x_out is then x_in: no __restrict__ on them).
extern "C" __global__ void __launch_bounds__(256) amg_correct(int n, const double* x_in,
    const double* __restrict__ d, double* x_out, const double* sc) {
    if (stopped(sc)) return;
    GRID_STRIDE(i, n) x_out[i] = x_in[i] + d[i];
}

// The largest (mx, at) over a warp's lanes, ties to the last row (Rust's max_by).
__device__ __forceinline__ void largest_over_warp(double& mx, int& at) {
    for (int o = 16; o > 0; o >>= 1) {
        const double m2 = __shfl_xor_sync(0xffffffffu, mx, o);
        const int at2 = __shfl_xor_sync(0xffffffffu, at, o);
        if (m2 > mx || (m2 == mx && at2 > at)) mx = m2, at = at2;
    }
}

// The coarsest matrix's dense inverse, one block of 1024 threads (n <= 1024:
// src/amg/cuda.rs DEVICE_INVERSE_ROWS): Gauss-Jordan with partial pivoting in
// place on the n x n matrix m, the columns unswapped at the end, which does
// the arithmetic of src/amg/host.rs dense_inverse on [A | I] with half the
// storage. m is the dynamic shared memory where the launch gives it n^2
// doubles (`in_shared`), else `scratch` in global memory: every pivot step
// passes over m, so in shared memory it costs a fraction. A row and column
// with no nonzero entry takes an identity pivot and comes out zero, as the
// host leaves it out. *status: -1, or the first column whose pivot is not
// above 1e-14 of the largest entry (singular).
extern "C" __global__ void __launch_bounds__(1024) amg_dense_inverse(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const double* __restrict__ v, double* scratch, int in_shared,
    double* __restrict__ inv, int* __restrict__ status) {
    extern __shared__ double dynamic[];
    __shared__ double factor[1024], best[32];
    __shared__ int live[1024], swapped[1024], best_row[32], pivot_row, failed;
    double* m = in_shared ? dynamic : scratch;
    const int tid = threadIdx.x, threads = blockDim.x, warp = tid >> 5, lane = tid & 31, warps = threads >> 5;
    for (int k = tid; k < n * n; k += threads) m[k] = 0.0;
    for (int i = tid; i < n; i += threads) live[i] = 0;
    if (tid == 0) failed = -1;
    __syncthreads();
    double largest = 0.0;  // A's largest entry, as on the host
    for (int i = tid; i < n; i += threads)
        for (int k = rp[i]; k < rp[i + 1]; ++k) {
            m[i * n + ci[k]] = v[k];
            if (v[k] != 0.0) live[i] = live[ci[k]] = 1;
            largest = fmax(largest, fabs(v[k]));
        }
    // the largest entry, over the block
    for (int o = 16; o > 0; o >>= 1) largest = fmax(largest, __shfl_xor_sync(0xffffffffu, largest, o));
    if (lane == 0) best[warp] = largest;
    __syncthreads();
    double scale = 0.0;
    for (int k = 0; k < warps; ++k) scale = fmax(scale, best[k]);
    for (int i = tid; i < n; i += threads)
        if (!live[i]) m[i * n + i] = 1.0;
    __syncthreads();
    for (int col = 0; col < n; ++col) {
        // the pivot: the largest |m[r][col]|, r >= col; on ties the last row (Rust's max_by)
        double mx = -1.0;
        int at = col;
        for (int r = col + tid; r < n; r += threads) {
            const double x = fabs(m[r * n + col]);
            if (x >= mx || x != x) mx = x != x ? __longlong_as_double(0x7ff0000000000000LL) : x, at = r;
        }
        largest_over_warp(mx, at);
        if (lane == 0) best[warp] = mx, best_row[warp] = at;
        __syncthreads();
        if (warp == 0) {  // the warps' bests, by the same rule
            mx = lane < warps ? best[lane] : -1.0;
            at = lane < warps ? best_row[lane] : col;
            largest_over_warp(mx, at);
            if (lane == 0) {
                const double pivot = fabs(m[at * n + col]);
                if (!(pivot > 1e-14 * scale)) failed = col;  // (NaN too)
                pivot_row = at;
                swapped[col] = at;
            }
        }
        __syncthreads();
        if (failed >= 0) break;
        const int piv = pivot_row;
        const double p = 1.0 / m[piv * n + col];
        // the factors, read before the swap (row col moves to the pivot's place)
        for (int r = tid; r < n; r += threads) factor[r] = r == col ? 0.0 : m[(r == piv ? col : r) * n + col];
        __syncthreads();
        // the pivot row swapped into place and scaled; at column col it holds
        // the identity's 1 (the column becomes the inverse's)
        for (int c = tid; c < n; c += threads) {
            const double x = m[piv * n + c];
            if (piv != col) m[piv * n + c] = m[col * n + c];
            m[col * n + c] = (c == col ? 1.0 : x) * p;
        }
        __syncthreads();
        // every other row less factor x the pivot row, a warp a row; at
        // column col the identity's 0 less factor x p (a row whose factor is
        // 0 holds 0 there already)
        for (int r = warp; r < n; r += warps) {
            const double f = factor[r];
            if (f != 0.0)
                for (int c = lane; c < n; c += 32) m[r * n + c] = (c == col ? 0.0 : m[r * n + c]) - f * m[col * n + c];
        }
        __syncthreads();
    }
    if (tid == 0) *status = failed;
    if (failed >= 0) return;
    // the columns unswapped, last swap first: column j of the inverse is m's
    // column `column[j]` (the factors' room, no longer needed)
    int* column = (int*)factor;
    if (tid == 0) {
        for (int j = 0; j < n; ++j) column[j] = j;
        for (int k = n - 1; k >= 0; --k) {
            const int t = column[k];
            column[k] = column[swapped[k]];
            column[swapped[k]] = t;
        }
    }
    __syncthreads();
    for (int k = tid; k < n * n; k += threads) {
        const int i = k / n, j = k % n;
        inv[k] = live[i] && live[j] ? m[i * n + column[j]] : 0.0;
    }
}

// ---- The parallel aggregation (src/amg/setup.rs aggregate_parallel, round for round) ----
// A node's neighbours are its row's columns other than itself; the graph is
// symmetric (the level's pattern, theta = 0).
#define MIS_OUT 0
#define MIS_UNDECIDED 1
#define MIS_ROOT 2

// Wellons' lowbias32: bijective, so no two nodes' keys tie (setup.rs mis_hash).
__device__ __forceinline__ u64 amg_mis_hash(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return (u64)x;
}

// state[i]: OUT for a node without neighbours (it joins no aggregate), else UNDECIDED.
extern "C" __global__ void __launch_bounds__(256) amg_mis_start(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, unsigned char* __restrict__ state) {
    GRID_STRIDE(i, n) {
        unsigned char s = MIS_OUT;
        for (int k = rp[i]; k < rp[i + 1]; ++k)
            if (ci[k] != i) s = MIS_UNDECIDED;
        state[i] = s;
    }
}

// A round's keys: an undecided node's ranks by its undecided neighbours,
// fewest first, then by its hash; a root's above every undecided one; an
// out node's 0.
extern "C" __global__ void __launch_bounds__(256) amg_mis_key(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const unsigned char* __restrict__ state, u64* __restrict__ key) {
    GRID_STRIDE(i, n) {
        const unsigned char s = state[i];
        u64 k = 0;
        if (s == MIS_UNDECIDED) {
            int open = 0;
            for (int e = rp[i]; e < rp[i + 1]; ++e) open += ci[e] != i && state[ci[e]] == MIS_UNDECIDED;
            k = (1ull << 62) | ((u64)(255 - min(open, 255)) << 32) | amg_mis_hash((unsigned int)i);
        } else if (s == MIS_ROOT) {
            k = (2ull << 62) | amg_mis_hash((unsigned int)i);
        }
        key[i] = k;
    }
}

// out[i]: the largest of `in` over node i and its neighbours.
extern "C" __global__ void __launch_bounds__(256) amg_mis_near(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const u64* __restrict__ in, u64* __restrict__ out) {
    GRID_STRIDE(i, n) {
        u64 m = in[i];
        for (int e = rp[i]; e < rp[i + 1]; ++e) m = max(m, in[ci[e]]);
        out[i] = m;
    }
}

// An undecided node whose key is the largest within distance two becomes a
// root; one with a root within distance two drops out. *left = 1 while any
// node stays undecided.
extern "C" __global__ void __launch_bounds__(256) amg_mis_decide(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const u64* __restrict__ key, const u64* __restrict__ near,
    unsigned char* __restrict__ state, int* __restrict__ left) {
    GRID_STRIDE(i, n) {
        if (state[i] != MIS_UNDECIDED) continue;
        u64 top = near[i];
        for (int e = rp[i]; e < rp[i + 1]; ++e) top = max(top, near[ci[e]]);
        if (top == key[i]) state[i] = MIS_ROOT;
        else if ((top >> 62) == 2) state[i] = MIS_OUT;
        else *left = 1;
    }
}

// flag[i] = 1 for a root, else 0 (scanned into the roots' numbers).
extern "C" __global__ void __launch_bounds__(256) amg_mis_roots(int n, const unsigned char* __restrict__ state,
    int* __restrict__ flag) {
    GRID_STRIDE(i, n) flag[i] = state[i] == MIS_ROOT;
}

// first[i]: a root's number, or its first root neighbour's (roots are three
// apart, so a node has one at most), else -1.
extern "C" __global__ void __launch_bounds__(256) amg_join_roots(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const unsigned char* __restrict__ state, const int* __restrict__ number,
    int* __restrict__ first) {
    GRID_STRIDE(i, n) {
        int a = state[i] == MIS_ROOT ? number[i] : -1;
        for (int e = rp[i]; e < rp[i + 1] && a < 0; ++e) {
            const int j = ci[e];
            if (j != i && state[j] == MIS_ROOT) a = number[j];
        }
        first[i] = a;
    }
}

// agg[i]: first[i], else the first aggregate among i's neighbours' first
// (row order), else -1.
extern "C" __global__ void __launch_bounds__(256) amg_join_neighbours(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const int* __restrict__ first, int* __restrict__ agg) {
    GRID_STRIDE(i, n) {
        int a = first[i];
        for (int e = rp[i]; e < rp[i + 1] && a < 0; ++e) {
            const int j = ci[e];
            if (j != i) a = first[j];
        }
        agg[i] = a;
    }
}

// T's pattern from the aggregates: flag pass (trp == null): count[i] = 1 for
// an aggregated node, else 0; after the scan, row i's one column agg[i].
extern "C" __global__ void __launch_bounds__(256) amg_tentative_pattern(int n, const int* __restrict__ agg,
    const int* __restrict__ trp, int* __restrict__ out) {
    GRID_STRIDE(i, n) {
        if (!trp) out[i] = agg[i] >= 0;
        else if (agg[i] >= 0) out[trp[i]] = agg[i];
    }
}

// ---- A pattern's transpose on the device: count, scan, scatter, sort ----
// count[c] += 1 for each entry in column c.
extern "C" __global__ void __launch_bounds__(256) amg_column_counts(i64 nnz, const int* __restrict__ ci,
    int* __restrict__ count) {
    GRID_STRIDE(k, nnz) atomicAdd(&count[ci[k]], 1);
}

// Each entry k of row i to a free slot of its column's row of the
// transpose (fill: that row's next slot, from its row pointer): row[slot] =
// i, from[slot] = k, in no set order (amg_transpose_sort orders them).
extern "C" __global__ void __launch_bounds__(256) amg_transpose_scatter(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, int* __restrict__ fill, int* __restrict__ row, int* __restrict__ from) {
    GRID_STRIDE(i, n) {
        for (int k = rp[i]; k < rp[i + 1]; ++k) {
            const int slot = atomicAdd(&fill[ci[k]], 1);
            row[slot] = (int)i;
            from[slot] = k;
        }
    }
}

// Each row of the transpose sorted by column (the rows it came from, each
// once): an entry's place is the count of the row's smaller columns. A
// warp a row; the transpose's rows hold tens of entries.
extern "C" __global__ void __launch_bounds__(256) amg_transpose_sort(int nt, const int* __restrict__ trp,
    const int* __restrict__ row, const int* __restrict__ from, int* __restrict__ tci, int* __restrict__ tfrom) {
    const int lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 c = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < nt; c += warps) {
        const int start = trp[c], end = trp[c + 1];
        for (int q = start + lane; q < end; q += 32) {
            const int mine = row[q];
            int place = start;
            for (int p = start; p < end; ++p) place += row[p] < mine;
            tci[place] = mine;
            if (tfrom) tfrom[place] = from[q];
        }
    }
}

// *total += the n counts (64-bit: a product's entries may pass what the
// int scan holds; the host checks before it allocates).
extern "C" __global__ void __launch_bounds__(256) amg_count_total(int n, const int* __restrict__ count,
    u64* __restrict__ total) {
    u64 s = 0;
    GRID_STRIDE(i, n) s += (u64)count[i];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0 && s) atomicAdd(total, s);
}

// diag[i]: the entry of row i in column i (-1: none).
extern "C" __global__ void __launch_bounds__(256) amg_diagonal_positions(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, int* __restrict__ diag) {
    GRID_STRIDE(i, n) {
        int d = -1;
        for (int k = rp[i]; k < rp[i + 1]; ++k)
            if (ci[k] == i) d = k;
        diag[i] = d;
    }
}
