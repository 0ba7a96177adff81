// Microbenchmark: the ILU(0) lower sweep of a 7-point factor on an nx x ny x nz box
// (rows x fastest) as a pipeline of x-line scans: a warp a plane, a line a step;
// each line's first-order recurrence y_i = c_i - l_i y_{i-1} solved by a warp scan of
// affine maps (4 points a lane at nx = 128). c_i = (b_i - lz_i yb_i) - ly_i yd_i in the
// CSR order's rounding; only the recurrence along the line is reassociated.
// Planes: W warps a block (plane k0 + w, warp w a step behind warp w - 1, values through
// shared memory, one barrier a step); a block's first plane polls the block before's
// last plane in global memory (each value its own completion flag).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define PENDING (-1LL)
typedef long long i64;

__device__ __forceinline__ bool pending(double v) { return __double_as_longlong(v) == PENDING; }
__device__ __forceinline__ double ld_relaxed(const double* p) {
    double v;
    asm volatile("ld.relaxed.gpu.global.f64 %0, [%1];" : "=d"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(double* p, double v) {
    asm volatile("st.relaxed.gpu.global.f64 [%0], %1;" ::"l"(p), "d"(v) : "memory");
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void waitg() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// E points a lane (nx = 32 E), W planes a block, D lines staged ahead.
// stage layout per (slot, warp): 4 arrays (lx, ly, lz, b) x E/2 halves x 64 doubles:
// lane l's points 2h, 2h+1 of its segment at [h*64 + 2l].
template <int E, int W, int D, int MODE, int G>
__global__ void __launch_bounds__(W * 32) lsweep_scan(int ny, int nz, const double* __restrict__ lx,
    const double* __restrict__ ly, const double* __restrict__ lz, const double* __restrict__ b, double* y,
    unsigned* ticket) {
    constexpr int NX = 32 * E, H = E / 2, PER = 5 * NX;  // doubles a warp a slot (lx, ly, lz, b, the plane before)
    extern __shared__ double stage[];                    // [D][W][4][H][64]
    __shared__ double ring[2][W][NX];                    // [step parity][warp]: the line just computed
    __shared__ int tk;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (threadIdx.x == 0) tk = (int)atomicAdd(ticket, 1u);
    __syncthreads();
    const int k = tk * W + w;
    const bool live = k < nz;
    const i64 area = (i64)NX * ny, pbase = (i64)k * area;
    const double* src[4] = {lx, ly, lz, b};
    auto load = [&](int slot, int j) {
        if (live && j >= 0 && j < ny) {
            double* d = stage + ((i64)slot * W + w) * PER;
            const i64 r0 = pbase + (i64)j * NX;
#pragma unroll
            for (int a = 0; a < 4; ++a)
#pragma unroll
                for (int h = 0; h < H; ++h) cp16(d + a * NX + 2 * (lane + 32 * h), src[a] + r0 + 2 * (lane + 32 * h));
            if (w == 0 && k > 0) {
#pragma unroll
                for (int h = 0; h < H; ++h) cp16(d + 4 * NX + 2 * (lane + 32 * h), y + r0 - area + 2 * (lane + 32 * h));
            }
        }
        commit();
    };
    // steps: warp w does line j = s - w at step s
    const int steps = ny + W - 1;
    if (threadIdx.x == 0 && k > 0 && k < nz) {
        const double* gate = y + pbase - area + (i64)min(G, ny - 1) * NX + NX - 1;
        while (pending(ld_relaxed(gate))) {}
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < D; ++u) load(u, u - w);
    double yd[E];
#pragma unroll
    for (int e = 0; e < E; ++e) yd[e] = 0.0;
    for (int s = 0; s < steps; ++s) {
        const int j = s - w, slot = s % D;
        waitg<D - 1>();
        if (live && j >= 0 && j < ny) {
            const double* d = stage + ((i64)slot * W + w) * PER;
            double fl[E], fd[E], fb[E], rb[E], yb[E];
#pragma unroll
            for (int h = 0; h < H; ++h) {
                double2 t;
                t = *(const double2*)(d + 0 * NX + E * lane + 2 * h); fl[2 * h] = t.x; fl[2 * h + 1] = t.y;
                t = *(const double2*)(d + 1 * NX + E * lane + 2 * h); fd[2 * h] = t.x; fd[2 * h + 1] = t.y;
                t = *(const double2*)(d + 2 * NX + E * lane + 2 * h); fb[2 * h] = t.x; fb[2 * h + 1] = t.y;
                t = *(const double2*)(d + 3 * NX + E * lane + 2 * h); rb[2 * h] = t.x; rb[2 * h + 1] = t.y;
            }
            // the maps' multipliers and their scan: factors only, off the chain
            double m[E], Q[E], Mlev[5];
            double M = 1.0;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                m[e] = (E * lane + e == 0) ? 0.0 : -fl[e];
                M *= m[e];
                Q[e] = M;  // y_e = P_e + Q_e y_in
            }
#pragma unroll
            for (int q = 0; q < 5; ++q) {
                const int o = 1 << q;
                Mlev[q] = M;
                const double Mo = __shfl_up_sync(0xffffffffu, M, o);
                if (lane >= o) M *= Mo;
            }
            if (k == 0) {
#pragma unroll
                for (int e = 0; e < E; ++e) yb[e] = 0.0;
            } else if (w > 0) {
#pragma unroll
                for (int h = 0; h < H; ++h) {
                    const double2 t = *(const double2*)&ring[(s + 1) & 1][w - 1][E * lane + 2 * h];
                    yb[2 * h] = t.x;
                    yb[2 * h + 1] = t.y;
                }
            } else {
                const double* p = y + pbase - area + (i64)j * NX + E * lane;
#pragma unroll
                for (int h = 0; h < H; ++h) {
                    const double2 t = *(const double2*)(d + 4 * NX + E * lane + 2 * h);
                    yb[2 * h] = t.x;
                    yb[2 * h + 1] = t.y;
                }
                bool miss = false;
#pragma unroll
                for (int e = 0; e < E; ++e) miss |= pending(yb[e]);
                if (__any_sync(0xffffffffu, miss)) {
#pragma unroll
                    for (int e = 0; e < E; ++e)
                        while (pending(yb[e])) yb[e] = ld_relaxed(p + e);
                }
            }
            // c in the CSR order (back, down); the lane's partial sums P_e; the scan of C
            double P[E], C = 0.0;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                double v = rb[e];
                if (k > 0) v -= fb[e] * yb[e];
                if (j > 0) v -= fd[e] * yd[e];
                C = fma(m[e], C, v);
                P[e] = C;
            }
#pragma unroll
            for (int q = 0; q < 5; ++q) {
                const int o = 1 << q;
                const double Co = __shfl_up_sync(0xffffffffu, C, o);
                if (lane >= o) C = fma(Mlev[q], Co, C);
            }
            double yin = __shfl_up_sync(0xffffffffu, C, 1);
            if (lane == 0) yin = 0.0;
#pragma unroll
            for (int e = 0; e < E; ++e) yd[e] = fma(Q[e], yin, P[e]);
#pragma unroll
            for (int h = 0; h < H; ++h)
                *(double2*)&ring[s & 1][w][E * lane + 2 * h] = make_double2(yd[2 * h], yd[2 * h + 1]);
            __syncwarp();
            // the line out, coalesced from the ring (the last plane's relaxed: another block polls it)
            double* out = y + pbase + (i64)j * NX;
#pragma unroll
            for (int h = 0; h < H; ++h) {
                const int i = 2 * (lane + 32 * h);
                const double2 t = *(const double2*)&ring[s & 1][w][i];
                if (w == W - 1) {
                    st_relaxed(out + i, t.x);
                    st_relaxed(out + i + 1, t.y);
                } else {
                    *(double2*)(out + i) = t;
                }
            }
        }
        load(slot, s + D - w);
        __syncthreads();
    }
    waitg<0>();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(ticket + 1, 1u) == gridDim.x - 1) { ticket[0] = 0; ticket[1] = 0; }
    }
}

static void ref(int nx, int ny, int nz, const std::vector<double>& lx, const std::vector<double>& ly,
                const std::vector<double>& lz, const std::vector<double>& b, std::vector<double>& y) {
    const i64 area = (i64)nx * ny;
    for (int k = 0; k < nz; ++k)
        for (int j = 0; j < ny; ++j)
            for (int i = 0; i < nx; ++i) {
                const i64 r = k * area + (i64)j * nx + i;
                double v = b[r];
                if (k > 0) v -= lz[r] * y[r - area];
                if (j > 0) v -= ly[r] * y[r - nx];
                if (i > 0) v -= lx[r] * y[r - 1];
                y[r] = v;
            }
}

template <int E, int W, int D, int MODE, int G>
static void run(int ny, int nz, double* lx, double* ly, double* lz, double* b, double* y, unsigned* tk,
                const std::vector<double>& yr, int reps) {
    const int nx = 32 * E;
    const size_t n = (size_t)nx * ny * nz;
    const size_t smem = (size_t)D * W * 5 * nx * sizeof(double);
    auto kern = lsweep_scan<E, W, D, MODE, G>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const int blocks = (nz + W - 1) / W;
    std::vector<double> yh(n);
    cudaEvent_t a, z;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&z));
    float best = 1e30f, sum = 0.f;
    for (int r = 0; r < reps + 1; ++r) {
        CK(cudaMemset(y, 0xff, n * 8));
        CK(cudaEventRecord(a));
        kern<<<blocks, W * 32, smem>>>(ny, nz, lx, ly, lz, b, y, tk);
        CK(cudaEventRecord(z));
        CK(cudaEventSynchronize(z));
        CK(cudaGetLastError());
        float ms; CK(cudaEventElapsedTime(&ms, a, z));
        if (r > 0) { best = std::min(best, ms); sum += ms; }
    }
    CK(cudaMemcpy(yh.data(), y, n * 8, cudaMemcpyDeviceToHost));
    double err = 0, mx = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(yh[i])) ++bad;
        err = std::max(err, std::fabs(yh[i] - yr[i]));
        mx = std::max(mx, std::fabs(yr[i]));
    }
    printf("G=%d E=%d W=%2d D=%d mode=%d blocks=%3d smem=%6zu  best %.4f ms  mean %.4f ms  max|dy|/max|y| %.2e  nonfinite %zu\n",
           G, E, W, D, MODE, blocks, smem, best, sum / reps, err / mx, bad);
}

int main(int argc, char** argv) {
    const int ny = argc > 1 ? atoi(argv[1]) : 128, nz = argc > 2 ? atoi(argv[2]) : 128;
    const int nx = 128;
    const size_t n = (size_t)nx * ny * nz;
    std::vector<double> lx(n), ly(n), lz(n), b(n), yr(n);
    srand(7);
    auto rnd = [] { return rand() / (double)RAND_MAX; };
    // factors as from an M-matrix's ILU(0): 0 < -l < 1/3 or so
    for (size_t i = 0; i < n; ++i) {
        lx[i] = -0.15 - 0.2 * rnd();
        ly[i] = -0.15 - 0.2 * rnd();
        lz[i] = -0.15 - 0.2 * rnd();
        b[i] = rnd() - 0.3;
    }
    ref(nx, ny, nz, lx, ly, lz, b, yr);
    double *dlx, *dly, *dlz, *db, *dy, *dc;
    unsigned* tk;
    CK(cudaMalloc(&dlx, n * 8)); CK(cudaMalloc(&dly, n * 8)); CK(cudaMalloc(&dlz, n * 8));
    CK(cudaMalloc(&db, n * 8)); CK(cudaMalloc(&dy, n * 8)); CK(cudaMalloc(&dc, 5 * n * 8));
    CK(cudaMalloc(&tk, 8)); CK(cudaMemset(tk, 0, 8));
    CK(cudaMemcpy(dlx, lx.data(), n * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dly, ly.data(), n * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dlz, lz.data(), n * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), n * 8, cudaMemcpyHostToDevice));
    // the copy ceiling: 5 n doubles moved (4 read, 1 written) as one d2d copy of 2.5 n each way
    {
        cudaEvent_t a, z; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&z));
        float best = 1e30f;
        for (int r = 0; r < 6; ++r) {
            CK(cudaEventRecord(a));
            CK(cudaMemcpy(dc + 2 * n, dc, (size_t)(2.5 * n * 8), cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(z)); CK(cudaEventSynchronize(z));
            float ms; CK(cudaEventElapsedTime(&ms, a, z)); if (r) best = std::min(best, ms);
        }
        printf("box %dx%dx%d: copy of the sweep's bytes (%.1f MB) %.4f ms\n", nx, ny, nz, 5.0 * n * 8 / 1e6, best);
    }
    const int reps = argc > 3 ? 2 : 20;
    if (argc > 3) { run<4, 1, 4, 0, 0>(ny, 1, dlx, dly, dlz, db, dy, tk, yr, reps); return 0; }
    run<4, 1, 4, 0, 0>(ny, 1, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 1, 3, 0, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 2, 3, 1, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 2, 4, 1, 6>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 4, 3, 1, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 4, 3, 1, 2>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 4, 4, 1, 6>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 8, 3, 1, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 8, 2, 1, 3>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 16, 2, 1, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    run<4, 6, 3, 1, 4>(ny, nz, dlx, dly, dlz, db, dy, tk, yr, reps);
    return 0;
}
