// Dense transpose and copy of column-major matrices.
//
// A is m x n column-major: A(i,j) sits at a[i + j*m]. Its transpose B = A^T
// is n x m column-major: B(j,i) sits at b[j + i*n]. Threads along x walk i
// (contiguous in A); tiles are staged through shared memory so that the
// writes to B are contiguous too. Grids cover x fully; y loops in steps of
// gridDim.y because gridDim.y is limited to 65535.
//
// Variants kept for the benchmark, as in the seed study:
//   naive   one element per thread, coalesced reads, strided writes;
//   tile    shared-memory tile, column reads of the tile hit one bank;
//   padded  the tile padded by one element per row: conflict-free.
// One element of padding suffices for both widths: for f32 a column of a
// 32x33 tile walks banks 33k mod 32 = k; for f64 (8-byte words served per
// half-warp) 66k mod 32 = 2k covers 16 distinct bank pairs.

typedef long long i64;

template <typename T>
__device__ void transpose_naive(const T* __restrict__ a, T* __restrict__ b, i64 m, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    for (i64 j = (i64)blockIdx.y * blockDim.y + threadIdx.y; j < n; j += (i64)gridDim.y * blockDim.y)
        b[j + i * n] = a[i + j * m];
}

// A block moves a TILE x (JT*TILE) panel: JT tiles along j share one barrier,
// so each thread has JT*TILE/ROWS loads in flight (f32 needs more than f64).
template <typename T, int TILE, int ROWS, int PAD, int JT>
__device__ void transpose_tiled(const T* __restrict__ a, T* __restrict__ b, i64 m, i64 n) {
    __shared__ T tile[JT * TILE][TILE + PAD];
    const i64 i0 = (i64)blockIdx.x * TILE;
    for (i64 j0 = (i64)blockIdx.y * JT * TILE; j0 < n; j0 += (i64)gridDim.y * JT * TILE) {
        const i64 i = i0 + threadIdx.x;
#pragma unroll
        for (int kk = 0; kk < JT * TILE; kk += ROWS) {
            const int k = kk + threadIdx.y;
            const i64 j = j0 + k;
            if (i < m && j < n) tile[k][threadIdx.x] = a[i + j * m];
        }
        __syncthreads();
#pragma unroll
        for (int q = 0; q < JT; ++q) {
            const i64 jw = j0 + q * TILE + threadIdx.x;
#pragma unroll
            for (int kk = 0; kk < TILE; kk += ROWS) {
                const int k = kk + threadIdx.y;
                const i64 iw = i0 + k;
                if (iw < m && jw < n) b[jw + iw * n] = tile[q * TILE + threadIdx.x][k];
            }
        }
        __syncthreads();
    }
}

// In-place transpose of a square n x n matrix: the block for tile (bx, by),
// bx <= by, swaps it with its mirror (by, bx) through two shared tiles.
template <typename T, int TILE, int ROWS, int PAD>
__device__ void transpose_square_tiled(T* __restrict__ a, i64 n) {
    __shared__ T t1[TILE][TILE + PAD];
    __shared__ T t2[TILE][TILE + PAD];
    const i64 bx = blockIdx.x;
    for (i64 by = blockIdx.y; by * TILE < n; by += gridDim.y) {
        if (bx > by) continue;
        const i64 i0 = bx * TILE, j0 = by * TILE;
        const bool diagonal = (bx == by);
#pragma unroll
        for (int kk = 0; kk < TILE; kk += ROWS) {
            const int k = kk + threadIdx.y;
            const i64 i = i0 + threadIdx.x, j = j0 + k;
            if (i < n && j < n) t1[k][threadIdx.x] = a[i + j * n];
            const i64 i2 = j0 + threadIdx.x, j2 = i0 + k;
            if (!diagonal && i2 < n && j2 < n) t2[k][threadIdx.x] = a[i2 + j2 * n];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; kk += ROWS) {
            const int k = kk + threadIdx.y;
            // A(i0+k, j0+tx) moves to (j0+tx, i0+k); its mirror moves back.
            const i64 r = j0 + threadIdx.x, c = i0 + k;
            if (r < n && c < n) a[r + c * n] = t1[threadIdx.x][k];
            const i64 r2 = i0 + threadIdx.x, c2 = j0 + k;
            if (!diagonal && r2 < n && c2 < n) a[r2 + c2 * n] = t2[threadIdx.x][k];
        }
        __syncthreads();
    }
}

// Naive in-place: each thread of the strict upper triangle swaps one pair.
template <typename T>
__device__ void transpose_square_naive(T* __restrict__ a, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (i64 j = (i64)blockIdx.y * blockDim.y + threadIdx.y; j < n; j += (i64)gridDim.y * blockDim.y) {
        if (i < j) {
            const T t = a[i + j * n];
            a[i + j * n] = a[j + i * n];
            a[j + i * n] = t;
        }
    }
}

// Copies with the same 2-D indexing as the transposes, so their bandwidth is
// the like-for-like ceiling the seed study compared against.
template <typename T>
__device__ void copy_naive(const T* __restrict__ a, T* __restrict__ b, i64 m, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    for (i64 j = (i64)blockIdx.y * blockDim.y + threadIdx.y; j < n; j += (i64)gridDim.y * blockDim.y)
        b[i + j * m] = a[i + j * m];
}

template <typename T, int TILE, int ROWS>
__device__ void copy_tiled(const T* __restrict__ a, T* __restrict__ b, i64 m, i64 n) {
    __shared__ T tile[TILE][TILE];
    const i64 i = (i64)blockIdx.x * TILE + threadIdx.x;
    for (i64 j0 = (i64)blockIdx.y * TILE; j0 < n; j0 += (i64)gridDim.y * TILE) {
#pragma unroll
        for (int kk = 0; kk < TILE; kk += ROWS) {
            const int k = kk + threadIdx.y;
            if (i < m && j0 + k < n) tile[k][threadIdx.x] = a[i + (j0 + k) * m];
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; kk += ROWS) {
            const int k = kk + threadIdx.y;
            if (i < m && j0 + k < n) b[i + (j0 + k) * m] = tile[k][threadIdx.x];
        }
        __syncthreads();
    }
}

#define FOR_TYPES(X) X(float, f32) X(double, f64)

// Each kernel's body under WANTED(name): compiled one at a time (kernels/one_kernel.cuh).
#define NAIVE(T, S)                                                                                             \
    extern "C" __global__ void transpose_naive_##S(const T* a, T* b, i64 m, i64 n) {                             \
        if constexpr (WANTED(transpose_naive_##S)) transpose_naive<T>(a, b, m, n);                               \
    }                                                                                                           \
    extern "C" __global__ void transpose_square_naive_##S(T* a, i64 n) {                                         \
        if constexpr (WANTED(transpose_square_naive_##S)) transpose_square_naive<T>(a, n);                       \
    }                                                                                                           \
    extern "C" __global__ void copy_naive_##S(const T* a, T* b, i64 m, i64 n) {                                  \
        if constexpr (WANTED(copy_naive_##S)) copy_naive<T>(a, b, m, n);                                         \
    }
FOR_TYPES(NAIVE)

// Tiled kernels, named <kind>_t<TILE>r<ROWS>j<JT>_<type>; the block is TILE x ROWS threads.
#define TILED(T, S, TILE, ROWS, JT)                                                                             \
    extern "C" __global__ void __launch_bounds__(TILE * ROWS) transpose_tile_t##TILE##r##ROWS##j##JT##_##S(       \
        const T* a, T* b, i64 m, i64 n) {                                                                       \
        if constexpr (WANTED(transpose_tile_t##TILE##r##ROWS##j##JT##_##S))                                     \
            transpose_tiled<T, TILE, ROWS, 0, JT>(a, b, m, n);                                                  \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(TILE * ROWS) transpose_padded_t##TILE##r##ROWS##j##JT##_##S(     \
        const T* a, T* b, i64 m, i64 n) {                                                                       \
        if constexpr (WANTED(transpose_padded_t##TILE##r##ROWS##j##JT##_##S))                                   \
            transpose_tiled<T, TILE, ROWS, 1, JT>(a, b, m, n);                                                  \
    }

#define COPY(T, S, TILE, ROWS)                                                                                  \
    extern "C" __global__ void __launch_bounds__(TILE * ROWS) copy_tile_t##TILE##r##ROWS##_##S(                  \
        const T* a, T* b, i64 m, i64 n) {                                                                       \
        if constexpr (WANTED(copy_tile_t##TILE##r##ROWS##_##S)) copy_tiled<T, TILE, ROWS>(a, b, m, n);          \
    }

// In place needs two tiles: 32-wide only, to stay within 48 KB of static shared memory.
#define SQUARE(T, S, TILE, ROWS)                                                                                \
    extern "C" __global__ void __launch_bounds__(TILE * ROWS) transpose_square_tile_t##TILE##r##ROWS##_##S(      \
        T* a, i64 n) {                                                                                          \
        if constexpr (WANTED(transpose_square_tile_t##TILE##r##ROWS##_##S))                                     \
            transpose_square_tiled<T, TILE, ROWS, 0>(a, n);                                                     \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(TILE * ROWS) transpose_square_padded_t##TILE##r##ROWS##_##S(    \
        T* a, i64 n) {                                                                                          \
        if constexpr (WANTED(transpose_square_padded_t##TILE##r##ROWS##_##S))                                   \
            transpose_square_tiled<T, TILE, ROWS, 1>(a, n);                                                     \
    }

#define SHAPES(T, S)                                                                       \
    TILED(T, S, 32, 8, 1) TILED(T, S, 32, 16, 1) TILED(T, S, 32, 32, 1) TILED(T, S, 64, 16, 1) \
    TILED(T, S, 32, 8, 2) TILED(T, S, 32, 8, 4) TILED(T, S, 32, 16, 2)                   \
    COPY(T, S, 32, 8) SQUARE(T, S, 32, 8)
FOR_TYPES(SHAPES)
