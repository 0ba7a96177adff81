// D3Q19 lattice Boltzmann: a fused collide-and-push step (BGK or TRT, Guo
// forcing; one pass over memory, ping-pong buffers), uniform equilibrium initialisation and the
// macroscopic fields. Populations are stored direction-major (SoA):
// f[i*n + site], site = x + nx*(y + ny*z), so every load and the rest
// direction's store are coalesced. Arithmetic is in R (float for f16 and
// f32 storage, double for f64). src/lbm/cpu.rs is the same algorithm on the host.
//
// Velocities in the Palabos order: direction i+9 is opposite i (i = 1..9).
// Flags: 0 fluid, 1 resting wall, 2 moving wall; sites beyond a non-periodic
// face are resting walls. Walls use halfway bounce-back (Ladd's correction
// for moving walls); wall sites keep their populations unchanged.

typedef long long i64;
typedef unsigned short half_bits;

// Storage <-> arithmetic. f16 storage (half_bits) keeps f_i - w_i in IEEE
// half precision, rounded to nearest even; f32 and f64 store f_i as is.
__device__ __forceinline__ float load_pop(float v, float) { return v; }
__device__ __forceinline__ double load_pop(double v, double) { return v; }
__device__ __forceinline__ float load_pop(half_bits h, float w) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f + w;
}
__device__ __forceinline__ void store_pop(float* p, float v, float) { *p = v; }
__device__ __forceinline__ void store_pop(double* p, double v, double) { *p = v; }
__device__ __forceinline__ void store_pop(half_bits* p, float v, float w) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v - w));
    *p = h;
}

#define D3Q19_TABLES(R)                                                                                 \
    const int cx[19] = {0, -1, 0, 0, -1, -1, -1, -1, 0, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0};               \
    const int cy[19] = {0, 0, -1, 0, -1, 1, 0, 0, -1, -1, 0, 1, 0, 1, -1, 0, 0, 1, 1};               \
    const int cz[19] = {0, 0, 0, -1, 0, 0, -1, 1, -1, 1, 0, 0, 1, 0, 0, 1, -1, 1, -1};               \
    const R w0 = R(1) / R(3), w1 = R(1) / R(18), w2 = R(1) / R(36);                                     \
    const R w[19] = {w0, w1, w1, w1, w2, w2, w2, w2, w2, w2, w1, w1, w1, w2, w2, w2, w2, w2, w2};

// Neighbour coordinate along one axis: wrapped where periodic, -1 beyond a wall face.
__device__ __forceinline__ int neighbour(int c, int d, int n, bool periodic) {
    int v = c + d;
    if (v < 0) v = periodic ? v + n : -1;
    else if (v >= n) v = periodic ? v - n : -1;
    return v;
}

// Collides site s (populations f) and pushes each post-collision population
// to its neighbour, or bounces it back. BGK relaxes with omega; TRT relaxes
// the even part of f - feq with omega and the odd part with omega_minus
// (the source term split the same way).
template <bool TRT, typename T, typename R>
__device__ __forceinline__ void collide_site(const R* f, unsigned s, T* __restrict__ fout, const unsigned char* __restrict__ flags,
                                             i64 n, int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy,
                                             R fz, R uwx, R uwy, R uwz) {
    D3Q19_TABLES(R)
    // Sites fit in 32 bits (Lattice::new refuses 2^31 or more), so the
    // coordinates come from 32-bit divisions, several times cheaper than 64-bit.
    const unsigned xy = s / (unsigned)nx;
    const int x = (int)(s - xy * (unsigned)nx), y = (int)(xy % (unsigned)ny), z = (int)(xy / (unsigned)ny);
    R rho = 0, jx = 0, jy = 0, jz = 0;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        rho += f[i];
        jx += cx[i] * f[i];
        jy += cy[i] * f[i];
        jz += cz[i] * f[i];
    }
    // Guo forcing: the velocity carries half the force; the source term the rest.
    const R ux = (jx + fx / 2) / rho, uy = (jy + fy / 2) / rho, uz = (jz + fz / 2) / rho;
    const R usq = ux * ux + uy * uy + uz * uz, uf = ux * fx + uy * fy + uz * fz;
    const R source_scale = 1 - omega / 2;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        const R cu = cx[i] * ux + cy[i] * uy + cz[i] * uz;
        const R cf = cx[i] * fx + cy[i] * fy + cz[i] * fz;
        const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
        R post;
        if (TRT) {
            const R even_eq = w[i] * rho * (1 + R(4.5) * cu * cu - R(1.5) * usq), odd_eq = w[i] * rho * 3 * cu;
            const R even = (f[i] + f[o]) / 2, odd = (f[i] - f[o]) / 2;
            post = f[i] - omega * (even - even_eq) - omega_minus * (odd - odd_eq) + source_scale * w[i] * (9 * cu * cf - 3 * uf) +
                   (1 - omega_minus / 2) * w[i] * 3 * cf;
        } else {
            const R feq = w[i] * rho * (1 + 3 * cu + R(4.5) * cu * cu - R(1.5) * usq);
            post = f[i] - omega * (f[i] - feq) + source_scale * w[i] * (3 * (cf - uf) + 9 * cu * cf);
        }
        const int xd = neighbour(x, cx[i], nx, periodic & 1), yd = neighbour(y, cy[i], ny, periodic & 2),
                  zd = neighbour(z, cz[i], nz, periodic & 4);
        const bool inside = xd >= 0 && yd >= 0 && zd >= 0;
        const unsigned d = inside ? (unsigned)xd + (unsigned)nx * ((unsigned)yd + (unsigned)ny * (unsigned)zd) : 0u;
        const unsigned char dflag = inside ? flags[d] : 1;
        if (dflag == 0) {
            store_pop(&fout[i * n + d], post, w[i]);
        } else {
            const R wall = dflag == 2 ? 6 * w[i] * rho * (cx[i] * uwx + cy[i] * uwy + cz[i] * uwz) : R(0);
            store_pop(&fout[o * n + s], post - wall, w[o]);
        }
    }
}

// One site per thread. (Measured on the H100, BENCHMARKS.md: two sites per
// thread with all loads first, and evict-first loads/stores, were slower.)
template <bool TRT, typename T, typename R>
__device__ void collide_push(const T* __restrict__ fin, T* __restrict__ fout, const unsigned char* __restrict__ flags,
                             int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy, R fz, R uwx, R uwy,
                             R uwz) {
    D3Q19_TABLES(R)
    const i64 n = (i64)nx * ny * nz;
    const unsigned s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    T stored[19];
#pragma unroll
    for (int i = 0; i < 19; ++i) stored[i] = fin[i * n + s];
    if (flags[s] == 0) {
        R f[19];
#pragma unroll
        for (int i = 0; i < 19; ++i) f[i] = load_pop(stored[i], w[i]);
        collide_site<TRT, T, R>(f, s, fout, flags, n, nx, ny, nz, periodic, omega, omega_minus, fx, fy, fz, uwx, uwy, uwz);
    } else {  // walls keep their populations, bit for bit
#pragma unroll
        for (int i = 0; i < 19; ++i) fout[i * n + s] = stored[i];
    }
}

template <typename T, typename R>
__device__ void equilibrium(T* __restrict__ f, i64 n, R rho, R ux, R uy, R uz) {
    D3Q19_TABLES(R)
    const i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    const R usq = ux * ux + uy * uy + uz * uz;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        const R cu = cx[i] * ux + cy[i] * uy + cz[i] * uz;
        store_pop(&f[i * n + s], w[i] * rho * (1 + 3 * cu + R(4.5) * cu * cu - R(1.5) * usq), w[i]);
    }
}

// Density and (force-corrected) velocity of sites first..first+count-1;
// u is (3, count). Wall sites report 0.
template <typename T, typename R>
__device__ void fields(const T* __restrict__ f, const unsigned char* __restrict__ flags, i64 n, i64 first, i64 count,
                       R fx, R fy, R fz, double* __restrict__ rho_out, double* __restrict__ u_out) {
    D3Q19_TABLES(R)
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const i64 s = first + t;
    R rho = 0, jx = 0, jy = 0, jz = 0;
    if (flags[s] == 0) {
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            const R v = load_pop(f[i * n + s], w[i]);
            rho += v;
            jx += cx[i] * v;
            jy += cy[i] * v;
            jz += cz[i] * v;
        }
    }
    const bool fluid = rho != 0;
    rho_out[t] = rho;
    u_out[3 * t] = fluid ? (jx + fx / 2) / rho : 0;
    u_out[3 * t + 1] = fluid ? (jy + fy / 2) / rho : 0;
    u_out[3 * t + 2] = fluid ? (jz + fz / 2) / rho : 0;
}

#define LBM_STEP(T, R, NAME, COLLISION, TRT)                                                                     \
    extern "C" __global__ void __launch_bounds__(256) lbm_step_##COLLISION##NAME(const T* fin, T* fout,           \
        const unsigned char* flags, int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy,      \
        R fz, R uwx, R uwy, R uwz) {                                                                              \
        collide_push<TRT, T, R>(fin, fout, flags, nx, ny, nz, periodic, omega, omega_minus, fx, fy, fz, uwx, uwy, \
                                uwz);                                                                             \
    }
#define LBM_KERNELS(T, R, NAME)                                                                                  \
    LBM_STEP(T, R, NAME, , false)                                                                                 \
    LBM_STEP(T, R, NAME, trt_, true)                                                                              \
    extern "C" __global__ void lbm_equilibrium_##NAME(T* f, i64 n, R rho, R ux, R uy, R uz) {                    \
        equilibrium<T, R>(f, n, rho, ux, uy, uz);                                                                 \
    }                                                                                                             \
    extern "C" __global__ void lbm_fields_##NAME(const T* f, const unsigned char* flags, i64 n, i64 first,       \
        i64 count, R fx, R fy, R fz, double* rho, double* u) {                                                    \
        fields<T, R>(f, flags, n, first, count, fx, fy, fz, rho, u);                                             \
    }
LBM_KERNELS(half_bits, float, f16)
LBM_KERNELS(float, float, f32)
LBM_KERNELS(double, double, f64)
