// Chunk kernels of the host-array pipelines (src/pipeline): each works on the
// chunk of items a lane has just copied in.

typedef long long i64;

// y = a x + b y over n elements; with b = 0, y is not read (as fegpu_vector_axpby).
extern "C" __global__ void __launch_bounds__(256) chunk_axpby(i64 n, double a, const double* __restrict__ x, double b, double* __restrict__ y) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        y[i] = b == 0.0 ? a * x[i] : fma(a, x[i], b * y[i]);
    }
}

// out(j) = A(:, j) . B(:, j) for the ncols columns of length m (column-major):
// one block per column, a tree reduction in shared memory.
extern "C" __global__ void __launch_bounds__(256) chunk_column_dots(i64 m, i64 ncols, const double* __restrict__ a, const double* __restrict__ b,
                                                                   double* __restrict__ out) {
    __shared__ double partial[256];
    for (i64 j = blockIdx.x; j < ncols; j += gridDim.x) {
        const double* aj = a + j * m;
        const double* bj = b + j * m;
        double sum = 0.0;
        for (i64 i = threadIdx.x; i < m; i += blockDim.x) sum = fma(aj[i], bj[i], sum);
        partial[threadIdx.x] = sum;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0) out[j] = partial[0];
        __syncthreads();
    }
}
