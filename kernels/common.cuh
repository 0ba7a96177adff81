// The prelude every kernel file that takes part in a Krylov iteration or a
// one-pass reduction shares (prepended to vector.cu, krylov.cu and
// sparse.cu when they are compiled): the device-resident scalars of a
// device-driven iteration, and the block reductions.

typedef long long i64;
typedef unsigned long long u64;

// The scalars of a device-driven CG or BiCGSTAB iteration (src/krylov/cuda.rs
// `Scalar` mirrors this layout). They stay on the device, so an iteration
// needs no host round-trip and replays as a CUDA graph; the host reads them
// back every few iterations. Each kernel of an iteration does nothing unless
// the status is RUNNING, so iterations queued past the end change nothing.
// TEAM: the address of a distributed solve's team table (below), as the
// double with the same bits; 0 in a one-process solve.
enum Scalar { BNORM, TOL, MAXIT, STATUS, ITER, RR, RZ, PQ, BETA, RHO, RHO_PREV, ALPHA, OMEGA, VALUE, TEAM, HALF_TOL, HIST = 16 };
#define HIST_LEN 64  // relative residuals of the last HIST_LEN iterations, by iteration modulo HIST_LEN
// TEAM_LOST: a distributed solve's rank waited TEAM_PATIENCE_NS for another
// rank that never answered (VALUE: that rank), and gave up rather than hang.
enum Status { RUNNING, CONVERGED, MAXITER, HALF_STEP, BREAK_NAN, BREAK_PQ, BREAK_RHO, BREAK_RV, BREAK_TT, BREAK_OMEGA, TEAM_LOST };

__device__ __forceinline__ bool stopped(const double* sc) { return sc && sc[STATUS] != RUNNING; }

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)


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

// ---- Teams: the ranks of a distributed solve on one node (src/dist/team.rs) ----
// Each rank owns a region of device memory that the others map (CUDA IPC):
// a ring of mailboxes, one per reduction in flight and rank, then a flag
// per rank counting the halos it has sent here, then the halo values. The
// team table (u64 words, TeamWord) holds the rank's counters and the
// regions' addresses as mapped in its own context.
enum TeamWord { T_RANK, T_SIZE, T_REDUCED, T_SENT, T_RECEIVED, T_DESTS, T_SOURCES, T_FLAGS, T_REGION };
#define TEAM_RING 4  // reductions a rank may run ahead of a mailbox's reader: 1 suffices, more is margin
struct TeamMail {
    double s1, s2;
    unsigned long long stamp, unused;
};
__device__ __forceinline__ void store_release(u64* p, u64 v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire(const u64* p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
#define TEAM_PATIENCE_NS 60000000000ull  // 60 s: far beyond any step of a live rank
__device__ __forceinline__ u64 global_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
// Waits until *stamp >= at_least; false if that takes longer than TEAM_PATIENCE_NS.
__device__ bool wait_for(const u64* stamp, u64 at_least) {
    const u64 start = global_ns();
    while (load_acquire(stamp) < at_least) {
        if (global_ns() - start > TEAM_PATIENCE_NS) return false;
        __nanosleep(100);
    }
    return true;
}

// An iteration's wait for `rank`; on timeout the solve stops as TEAM_LOST.
__device__ bool wait_for_rank(const u64* stamp, u64 at_least, double* sc, int rank) {
    if (wait_for(stamp, at_least)) return true;
    sc[VALUE] = rank;
    sc[STATUS] = TEAM_LOST;
    return false;
}

// One thread: sends the rank's sums to every rank's mailbox of this
// reduction, waits for every rank's, and adds them in rank order, so every
// rank holds the same totals, bit for bit, and takes the same decisions.
__device__ void team_sums(u64* t, double& s1, double& s2, double* sc) {
    const int rank = (int)t[T_RANK], size = (int)t[T_SIZE];
    const u64 seq = t[T_REDUCED] + 1;
    t[T_REDUCED] = seq;
    const int slot = (int)(seq % TEAM_RING);
    for (int r = 0; r < size; r++) {
        TeamMail* m = (TeamMail*)t[T_REGION + r] + slot * size + rank;
        m->s1 = s1;
        m->s2 = s2;
    }
    __threadfence_system();
    for (int r = 0; r < size; r++) store_release(&((TeamMail*)t[T_REGION + r] + slot * size + rank)->stamp, seq);
    const TeamMail* mine = (const TeamMail*)t[T_REGION + rank] + slot * size;
    double a = 0.0, b = 0.0;
    for (int r = 0; r < size; r++) {
        if (!wait_for_rank(&mine[r].stamp, seq, sc, r)) return;
        a += __ldcv(&mine[r].s1);
        b += __ldcv(&mine[r].s2);
    }
    s1 = a;
    s2 = b;
}

// last_block_sums for an iteration's reductions: in a distributed solve
// (sc[TEAM] set) the totals are then summed over the team's ranks.
// (false too when a rank of the team never answered: the solve then stops).
__device__ bool iteration_sums(double s1, double s2, double* partial, unsigned int* counter, double* sc, double& t1,
    double& t2) {
    if (!last_block_sums(s1, s2, partial, counter, t1, t2)) return false;
    const u64 team = (u64)__double_as_longlong(sc[TEAM]);
    if (team) team_sums((u64*)team, t1, t2, sc);
    return sc[STATUS] != TEAM_LOST;
}

// CG's p.Ap into PQ; not positive: breakdown.
__device__ void set_pq(double* sc, double pq) {
    sc[PQ] = pq;
    if (!(pq > 0.0 && isfinite(pq))) {
        sc[VALUE] = pq;
        sc[STATUS] = BREAK_PQ;
    }
}

// acc += B (sign x), B a K x K block stored column by column (kernels/block.cu).
template <int K>
__device__ __forceinline__ void add_mat_vec(const double* __restrict__ b, const double* x, double* acc, double sign) {
#pragma unroll
    for (int j = 0; j < K; ++j) {
        const double xj = sign * x[j];
#pragma unroll
        for (int i = 0; i < K; ++i) acc[i] += b[j * K + i] * xj;
    }
}
