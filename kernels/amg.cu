// The AMG V-cycle's own kernels (src/amg/cuda.rs); restriction and
// prolongation are sparse.cu's SpMV. One thread group of TPR lanes per row,
// as SpMV. `sc` (may be null): the solver scalars of a device-driven
// iteration; every kernel does nothing once they say stop.
// (kernels/common.cuh and csr.cuh are prepended.)

// One smoothing step: d = c1 d + c2 inv (b - A x_in); x_out = x_in + d, with
// (c1, c2) = coef[2 step], coef[2 step + 1]. x_in == null: the first step from
// x = 0 (no product, d not read). x_in and x_out are different buffers.
template <int TPR>
__device__ void smooth(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
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
template <int TPR>
__device__ void residual(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ v,
                         const double* __restrict__ b, const double* __restrict__ x, double* __restrict__ r,
                         const double* sc) {
    if (stopped(sc)) return;
    const i64 row = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
    const int lane = threadIdx.x & (TPR - 1);
    const double ax = row_times<TPR>(row, n, lane, rp, ci, v, x);
    if (row < n && lane == 0) r[row] = b[row] - ax;
}

#define AMG(TPR)                                                                                                  \
    extern "C" __global__ void __launch_bounds__(256) amg_smooth_tpr##TPR(int n, const int* rp, const int* ci,     \
        const double* v, const double* inv, const double* b, const double* x_in, double* x_out, double* d,         \
        const double* coef, int step, const double* sc) {                                                          \
        smooth<TPR>(n, rp, ci, v, inv, b, x_in, x_out, d, coef, step, sc);                                        \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(256) amg_residual_tpr##TPR(int n, const int* rp, const int* ci,   \
        const double* v, const double* b, const double* x, double* r, const double* sc) {                          \
        residual<TPR>(n, rp, ci, v, b, x, r, sc);                                                                  \
    }
AMG(1) AMG(2) AMG(4) AMG(8) AMG(16) AMG(32)

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
