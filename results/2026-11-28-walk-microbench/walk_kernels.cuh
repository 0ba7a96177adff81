// Microbenchmark: lower ILU(0) sweep of a 7-point stencil on an N^3 box,
// factors stored step-major per plane (coalesced), loads LEAD steps ahead
// in registers, the plane before's values polled DZ steps ahead, P planes
// a block with the in-block hand-off through shared memory.
#define PENDING_BITS (-1LL)
__device__ __forceinline__ bool is_pending(double v) { return __double_as_longlong(v) == PENDING_BITS; }
__device__ __forceinline__ double ld_relaxed(const double* p) {
    double v;
    asm volatile("ld.relaxed.gpu.global.f64 %0, [%1];" : "=d"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_relaxed(double* p, double v) {
    asm volatile("st.relaxed.gpu.global.f64 [%0], %1;" ::"l"(p), "d"(v) : "memory");
}
__device__ __forceinline__ double await_v(const double* p) {
    double v = ld_relaxed(p);
    while (is_pending(v)) v = ld_relaxed(p);
    return v;
}

// compact step-major layout of an N x N plane: step sp holds lines
// jlo(sp) .. min(sp, N-1), one after another
__host__ __device__ __forceinline__ long long step_off(int sp, int N) {
    if (sp < N) return (long long)sp * (sp + 1) / 2;
    const long long r = 2 * N - 1 - sp;
    return (long long)N * N - r * (r + 1) / 2;
}
__host__ __device__ __forceinline__ long long lidx(int plane, int sp, int j, int N) {
    const int jlo = sp < N ? 0 : sp - N + 1;
    return (long long)plane * N * N + step_off(sp, N) + (j - jlo);
}

__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// L[e][(plane * S + s) * N + j], S = 2N - 1 steps a plane; point of thread j
// at plane step s: i = s - j.
template <int P, int LEAD, int DZ, int MODE>
__global__ void __launch_bounds__(512) walk_lower(int N, int nz, int lz, const double* __restrict__ L,
                                                  const double* __restrict__ r, double* y, unsigned int* ctl, unsigned long long* tm, int lag) {
    __shared__ double ring[2][P * 128];
    __shared__ int ticket;
    if (threadIdx.x == 0) {
        ticket = (int)atomicAdd(ctl, 1u);
        // start once the plane before is `lag` steps on: its loads ahead then find values there
        if (lag > 0 && ticket > 0 && ticket * P < nz) await_v(&y[(long long)ticket * P * N * N - (long long)N * N + min(lag, N - 1)]);
    }
    __syncthreads();
    const int t = threadIdx.x, q = t / N, j = t % N;
    const int plane = ticket * P + q;
    const int S = 2 * N - 1;
    const long long plane_pts = (long long)N * N, nL = (long long)lz * N * N;
    const long long base = plane * plane_pts + (long long)j * N;
    const int steps = S + P - 1;
    const bool live = plane < nz;
    double l0[LEAD], l1[LEAD], l2[LEAD], rr[LEAD], gz[LEAD];
    auto load = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (!live || i < 0 || i >= N) return;
        const long long li = lidx(plane, sp, j, N);
        if (MODE & 1) {  // no global loads
            l0[u] = l1[u] = l2[u] = -0.15;
            rr[u] = 1.0;
            return;
        }
        l0[u] = L[li];
        l1[u] = L[nL + li];
        l2[u] = L[2 * nL + li];
        rr[u] = r[base + i];
    };
    auto loadz = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (!live || q != 0 || plane == 0 || i < 0 || i >= N) return;
        gz[u] = ld_relaxed(&y[base + i - plane_pts]);
    };
#pragma unroll
    for (int u = 0; u < LEAD; ++u) load(u, u);
#pragma unroll
    for (int u = 0; u < DZ; ++u) loadz(u, u);
    double left = 0.0;
    for (int s0 = 0; s0 < steps; s0 += LEAD) {
#pragma unroll
        for (int u = 0; u < LEAD; ++u) {
            const int s = s0 + u;
            const int i = s - q - j;
            if (live && i >= 0 && i < N) {
                double v = rr[u];
                if (i > 0) v -= l0[u] * left;
                if (j > 0) v -= l1[u] * ring[(s - 1) & 1][t - 1];
                if (q > 0) {
                    v -= l2[u] * ring[(s - 1) & 1][t - N];
                } else if (plane > 0) {
                    const double g = (DZ == 0 || is_pending(gz[u])) ? await_v(&y[base + i - plane_pts]) : gz[u];
                    v -= l2[u] * g;
                }
                if (tm && j == 0 && i == 0) tm[2 * plane] = gtime();
                if (tm && j == N - 1 && i == N - 1) tm[2 * plane + 1] = gtime();
                ring[s & 1][t] = v;
                left = v;
                if (!(MODE & 2)) st_relaxed(&y[base + i], v);
                else if (v == 12345.0) y[0] = v;
            }
            if (DZ > 0) loadz((u + DZ) % LEAD, s + DZ);
            load(u, s + LEAD);
            __syncthreads();
        }
    }
    if (threadIdx.x == 0 && atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
        ctl[0] = 0;
        ctl[1] = 0;
        __threadfence();
    }
}

// The same walk with the factors and r staged through shared memory by
// cp.async, LEAD steps ahead (async groups, not register scoreboards, so
// every step's loads stay in flight).
__device__ __forceinline__ void cp_async8(double* dst, const double* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

template <int P, int LEAD, int DZ, int MODE>
__global__ void __launch_bounds__(P * 128) walk_lower2(int N, int nz, int lz, const double* __restrict__ L,
                                                   const double* __restrict__ r, double* y, unsigned int* ctl,
                                                   unsigned long long* tm, int lag) {
    extern __shared__ double stage[];  // stage[(u * 4 + e) * T + t]
    __shared__ double ring[2][P * 128];
    __shared__ int ticket;
    const int T = P * N;
    if (threadIdx.x == 0) ticket = (int)atomicAdd(ctl, 1u);
    __syncthreads();
    const int t = threadIdx.x, q = t / N, j = t % N;
    const int plane = ticket * P + q;
    const int S = 2 * N - 1;
    const long long plane_pts = (long long)N * N, nL = (long long)lz * N * N;
    const long long base = plane * plane_pts + (long long)j * N;
    const int steps = S + P - 1;
    const bool live = plane < nz;
    double gz[LEAD];
    auto load = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (live && i >= 0 && i < N) {
            const long long li = lidx(plane, sp, j, N);
            cp_async8(&stage[(u * 4 + 0) * T + t], &L[li]);
            cp_async8(&stage[(u * 4 + 1) * T + t], &L[nL + li]);
            cp_async8(&stage[(u * 4 + 2) * T + t], &L[2 * nL + li]);
            cp_async8(&stage[(u * 4 + 3) * T + t], &r[base + i]);
        }
        cp_commit();
    };
    auto loadz = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (!live || q != 0 || plane == 0 || i < 0 || i >= N) return;
        gz[u] = ld_relaxed(&y[base + i - plane_pts]);
    };
#pragma unroll
    for (int u = 0; u < LEAD; ++u) load(u, u);
    // the factors are on their way; now wait until the plane before is `lag` steps on
    if (threadIdx.x == 0 && lag > 0 && ticket > 0 && live)
        await_v(&y[(long long)ticket * P * N * N - (long long)N * N + min(lag, N - 1)]);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < DZ; ++u) loadz(u, u);
    double left = 0.0;
    for (int s0 = 0; s0 < steps; s0 += LEAD) {
#pragma unroll
        for (int u = 0; u < LEAD; ++u) {
            const int s = s0 + u;
            const int i = s - q - j;
            cp_wait<LEAD - 1>();
            if (live && i >= 0 && i < N) {
                const double l0 = stage[(u * 4 + 0) * T + t], l1 = stage[(u * 4 + 1) * T + t],
                             l2 = stage[(u * 4 + 2) * T + t], rr = stage[(u * 4 + 3) * T + t];
                double v = rr;
                if (i > 0) v -= l0 * left;
                if (j > 0) v -= l1 * ring[(s - 1) & 1][t - 1];
                if (q > 0) {
                    v -= l2 * ring[(s - 1) & 1][t - N];
                } else if (plane > 0) {
                    const double g = (DZ == 0 || is_pending(gz[u])) ? await_v(&y[base + i - plane_pts]) : gz[u];
                    v -= l2 * g;
                }
                if (tm && j == 0 && i == 0) tm[2 * plane] = gtime();
                if (tm && j == N - 1 && i == N - 1) tm[2 * plane + 1] = gtime();
                ring[s & 1][t] = v;
                left = v;
                st_relaxed(&y[base + i], v);
            }
            if (DZ > 0) loadz((u + DZ) % LEAD, s + DZ);
            load(u, s + LEAD);
            __syncthreads();
        }
    }
    if (threadIdx.x == 0 && atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
        ctl[0] = 0;
        ctl[1] = 0;
        __threadfence();
    }
}

// Vectors in the step-major layout too (r read, y written, coalesced).
template <int P, int LEAD, int DZ, int MODE>
__global__ void __launch_bounds__(P * 128) walk_lower3(int N, int nz, int lz, const double* __restrict__ L,
                                                   const double* __restrict__ r, double* y, unsigned int* ctl,
                                                   unsigned long long* tm, int lag) {
    extern __shared__ double stage[];  // stage[(u * 4 + e) * T + t]
    __shared__ double ring[2][P * 128];
    __shared__ int ticket;
    const int T = P * N;
    if (threadIdx.x == 0) ticket = (int)atomicAdd(ctl, 1u);
    __syncthreads();
    const int t = threadIdx.x, q = t / N, j = t % N;
    const int plane = ticket * P + q;
    const int S = 2 * N - 1;
    const long long plane_pts = (long long)N * N, nL = (long long)lz * N * N;
    const long long base = plane * plane_pts + (long long)j * N;
    const int steps = S + P - 1;
    const bool live = plane < nz;
    double gz[LEAD];
    auto load = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (live && i >= 0 && i < N) {
            const long long li = lidx(plane, sp, j, N);
            cp_async8(&stage[(u * 4 + 0) * T + t], &L[li]);
            cp_async8(&stage[(u * 4 + 1) * T + t], &L[nL + li]);
            cp_async8(&stage[(u * 4 + 2) * T + t], &L[2 * nL + li]);
            cp_async8(&stage[(u * 4 + 3) * T + t], &r[li]);
        }
        cp_commit();
    };
    auto loadz = [&](int u, int s) {
        const int sp = s - q, i = sp - j;
        if (!live || q != 0 || plane == 0 || i < 0 || i >= N) return;
        gz[u] = ld_relaxed(&y[lidx(plane - 1, sp, j, N)]);
    };
#pragma unroll
    for (int u = 0; u < LEAD; ++u) load(u, u);
    // the factors are on their way; now wait until the plane before is `lag` steps on
    if (threadIdx.x == 0 && lag > 0 && ticket > 0 && live)
        await_v(&y[lidx(ticket * P - 1, min(lag, N - 1), 0, N)]);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < DZ; ++u) loadz(u, u);
    double left = 0.0;
    for (int s0 = 0; s0 < steps; s0 += LEAD) {
#pragma unroll
        for (int u = 0; u < LEAD; ++u) {
            const int s = s0 + u;
            const int i = s - q - j;
            cp_wait<LEAD - 1>();
            if (live && i >= 0 && i < N) {
                const double l0 = stage[(u * 4 + 0) * T + t], l1 = stage[(u * 4 + 1) * T + t],
                             l2 = stage[(u * 4 + 2) * T + t], rr = stage[(u * 4 + 3) * T + t];
                double v = rr;
                if (i > 0) v -= l0 * left;
                if (j > 0) v -= l1 * ring[(s - 1) & 1][t - 1];
                if (q > 0) {
                    v -= l2 * ring[(s - 1) & 1][t - N];
                } else if (plane > 0) {
                    const double g = (DZ == 0 || is_pending(gz[u])) ? await_v(&y[lidx(plane - 1, s - q, j, N)]) : gz[u];
                    v -= l2 * g;
                }
                if (tm && j == 0 && i == 0) tm[2 * plane] = gtime();
                if (tm && j == N - 1 && i == N - 1) tm[2 * plane + 1] = gtime();
                ring[s & 1][t] = v;
                left = v;
                st_relaxed(&y[lidx(plane, s - q, j, N)], v);
            }
            if (DZ > 0) loadz((u + DZ) % LEAD, s + DZ);
            load(u, s + LEAD);
            __syncthreads();
        }
    }
    if (threadIdx.x == 0 && atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
        ctl[0] = 0;
        ctl[1] = 0;
        __threadfence();
    }
}

// Lean form: one index a step for all arrays (compact step-major layout,
// vectors too), nothing else in the loop. DIV: divide by a diagonal (the
// upper sweep's cost), read from a fourth factor array.
template <int P, int LEAD, int DZ, bool DIV>
__global__ void __launch_bounds__(P * 128) walk4(int N, int nz, int lz, const double* __restrict__ L,
                                                 const double* __restrict__ r, double* y, unsigned int* ctl, int lag) {
    constexpr int A = DIV ? 5 : 4;  // staged arrays: 3 factors, (diagonal), rhs
    extern __shared__ double stage[];  // stage[(u * A + e) * T + t]
    __shared__ double ring[2][P * 128];
    __shared__ int ticket;
    const int T = P * 128;
    if (threadIdx.x == 0) ticket = (int)atomicAdd(ctl, 1u);
    __syncthreads();
    const int t = threadIdx.x, q = t >> 7, j = t & 127;
    const int plane = ticket * P + q;
    const int S = 2 * N - 1, NN = N * N;
    const int nL = lz * NN;
    const int steps = S + P - 1;
    const bool live = plane < nz;
    const int pbase = plane * NN;
    // index of this thread's point at plane step sp (valid when 0 <= sp - j < N)
    auto idx = [&](int sp) {
        const int r2 = S - sp;
        const int off = sp < N ? (sp * (sp + 1)) >> 1 : NN - ((r2 * (r2 + 1)) >> 1);
        const int jlo = sp < N ? 0 : sp - N + 1;
        return pbase + off + j - jlo;
    };
    auto valid = [&](int sp) { return live && (unsigned)(sp - j) < (unsigned)N; };
    double* st = stage + t;
    auto load = [&](int u, int s) {
        const int sp = s - q;
        if (valid(sp)) {
            const int k = idx(sp);
            double* d = st + u * A * T;
            cp_async8(d, &L[k]);
            cp_async8(d + T, &L[nL + k]);
            cp_async8(d + 2 * T, &L[2 * nL + k]);
            if (DIV) cp_async8(d + 3 * T, &L[3 * nL + k]);
            cp_async8(d + (A - 1) * T, &r[k]);
        }
        cp_commit();
    };
    double gz[LEAD];
    auto loadz = [&](int u, int s) {
        const int sp = s - q;
        if (q == 0 && plane > 0 && valid(sp)) gz[u] = ld_relaxed(&y[idx(sp) - NN]);
    };
#pragma unroll
    for (int u = 0; u < LEAD; ++u) load(u, u);
    if (threadIdx.x == 0 && lag > 0 && ticket > 0 && live) await_v(&y[pbase - NN + min(lag, N - 1)]);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < DZ; ++u) loadz(u, u);
    double left = 0.0;
    for (int s0 = 0; s0 < steps; s0 += LEAD) {
#pragma unroll
        for (int u = 0; u < LEAD; ++u) {
            const int s = s0 + u, sp = s - q;
            cp_wait<LEAD - 1>();
            if (valid(sp)) {
                const double* d = st + u * A * T;
                double v = d[(A - 1) * T];
                const int i = sp - j;
                if (i > 0) v -= d[0] * left;
                if (j > 0) v -= d[T] * ring[(s - 1) & 1][t - 1];
                if (q > 0) {
                    v -= d[2 * T] * ring[(s - 1) & 1][t - 128];
                } else if (plane > 0) {
                    const int k = idx(sp);
                    const double g = (DZ == 0 || is_pending(gz[u])) ? await_v(&y[k - NN]) : gz[u];
                    v -= d[2 * T] * g;
                }
                if (DIV) v /= d[3 * T];
                ring[s & 1][t] = v;
                left = v;
                st_relaxed(&y[idx(sp)], v);
            }
            if (DZ > 0) loadz((u + DZ) % LEAD, s + DZ);
            load(u, s + LEAD);
            __syncthreads();
        }
    }
    if (threadIdx.x == 0 && atomicAdd(&ctl[1], 1u) == gridDim.x - 1) {
        ctl[0] = 0;
        ctl[1] = 0;
        __threadfence();
    }
}
