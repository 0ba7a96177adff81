// The device-driven CG and BiCGSTAB iterations: every kernel reads and
// writes the scalars in `sc` (layout in kernels/common.cuh) and does nothing
// once they say stop, so iterations queued past the end change nothing.
// (kernels/common.cuh is prepended.)

// ---- Device-driven iterations (scalars in sc, layout above) ----

// Ends iteration ITER + 1 with residual norm^2 rr: records it and stops on a
// non-finite residual or convergence. Returns true while the method goes on.
__device__ bool end_iteration(double* sc, double rr) {
    const double it = sc[ITER] + 1;
    const double rel = sqrt(rr) / sc[BNORM];
    sc[ITER] = it;
    sc[RR] = rr;
    sc[HIST + (i64)it % HIST_LEN] = rel;
    if (!isfinite(rel)) {
        sc[STATUS] = BREAK_NAN;
    } else if (rel <= sc[TOL]) {
        sc[STATUS] = CONVERGED;
    } else {
        return true;
    }
    return false;
}

__device__ void stop_at_maxit(double* sc) {
    if (sc[STATUS] == RUNNING && sc[ITER] >= sc[MAXIT]) sc[STATUS] = MAXITER;
}

extern "C" __global__ void __launch_bounds__(256) cg_pq(i64 n, const double* __restrict__ p, const double* __restrict__ q,
    double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(cg_pq)) {
        if (stopped(sc)) return;
        double s = 0.0;
        GRID_STRIDE(i, n) s += p[i] * q[i];
        double pq, unused;
        if (iteration_sums(block_sum(s), 0.0, partial, counter, sc, pq, unused)) {
            set_pq(sc, pq);
        }
    }
}


// CG's vector step in one pass with alpha = RZ / PQ: x += alpha p; r -= alpha q;
// z = d .* r when d is given (Jacobi; otherwise z is r), then (r.z, r.r) end
// the iteration (BETA = r.z / RZ). With `rz_follows` (ILU(0): z comes from the
// triangular sweeps after this kernel), only RR is stored and cg_rz ends it.
extern "C" __global__ void __launch_bounds__(256) cg_step(i64 n, const double* __restrict__ p,
    const double* __restrict__ q, double* __restrict__ x, double* __restrict__ r, const double* __restrict__ d,
    double* __restrict__ z, int rz_follows, double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(cg_step)) {
        if (stopped(sc)) return;
        const double alpha = sc[RZ] / sc[PQ];
        double s1 = 0.0, s2 = 0.0;
        GRID_STRIDE(i, n) {
            x[i] += alpha * p[i];
            const double ri = r[i] - alpha * q[i];
            r[i] = ri;
            double zi = ri;
            if (d) {
                zi = d[i] * ri;
                z[i] = zi;
            }
            s1 += ri * zi;
            s2 += ri * ri;
        }
        double rz, rr;
        if (iteration_sums(block_sum(s1), block_sum(s2), partial, counter, sc, rz, rr)) {
            if (rz_follows) {
                sc[RR] = rr;
                return;
            }
            sc[BETA] = rz / sc[RZ];
            sc[RZ] = rz;
            if (end_iteration(sc, rr)) stop_at_maxit(sc);
        }
    }
}

// CG with ILU(0): r.z after the sweeps ends the iteration.
extern "C" __global__ void __launch_bounds__(256) cg_rz(i64 n, const double* __restrict__ r, const double* __restrict__ z,
    double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(cg_rz)) {
        if (stopped(sc)) return;
        double s = 0.0;
        GRID_STRIDE(i, n) s += r[i] * z[i];
        double rz, unused;
        if (iteration_sums(block_sum(s), 0.0, partial, counter, sc, rz, unused)) {
            sc[BETA] = rz / sc[RZ];
            sc[RZ] = rz;
            if (end_iteration(sc, sc[RR])) stop_at_maxit(sc);
        }
    }
}

// CG: p = z + BETA p.
extern "C" __global__ void __launch_bounds__(256) cg_direction(i64 n, const double* __restrict__ z, double* __restrict__ p,
    const double* sc) {
    if constexpr (WANTED(cg_direction)) {
        if (stopped(sc)) return;
        const double beta = sc[BETA];
        GRID_STRIDE(i, n) p[i] = z[i] + beta * p[i];
    }
}

// BiCGSTAB: p = r on the first iteration, then p = r + beta (p - OMEGA v)
// with beta = (RHO / RHO_PREV) (ALPHA / OMEGA).
extern "C" __global__ void __launch_bounds__(256) bicg_direction(i64 n, const double* __restrict__ r,
    const double* __restrict__ v, double* __restrict__ p, const double* sc) {
    if constexpr (WANTED(bicg_direction)) {
        if (stopped(sc)) return;
        if (sc[ITER] == 0) {
            GRID_STRIDE(i, n) p[i] = r[i];
            return;
        }
        const double omega = sc[OMEGA];
        const double beta = (sc[RHO] / sc[RHO_PREV]) * (sc[ALPHA] / omega);
        GRID_STRIDE(i, n) p[i] = r[i] + beta * (p[i] - omega * v[i]);
    }
}

// BiCGSTAB: ALPHA = RHO / (r0, v); a zero (r0, v) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_alpha(i64 n, const double* __restrict__ rhat,
    const double* __restrict__ v, double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(bicg_alpha)) {
        if (stopped(sc)) return;
        double s = 0.0;
        GRID_STRIDE(i, n) s += rhat[i] * v[i];
        double rv, unused;
        if (iteration_sums(block_sum(s), 0.0, partial, counter, sc, rv, unused)) {
            if (rv == 0.0 || !isfinite(rv)) {
                sc[VALUE] = rv;
                sc[STATUS] = BREAK_RV;
            } else {
                sc[ALPHA] = sc[RHO] / rv;
            }
        }
    }
}

// BiCGSTAB: s = r - ALPHA v; a small enough s ends the iteration half way
// (HALF_STEP: bicg_update then adds only ALPHA phat to x). The half step's
// test is against HALF_TOL: TOL, or -1 for a split solve, whose stops are confirmed
// on the caller's residual after a whole step.
extern "C" __global__ void __launch_bounds__(256) bicg_s(i64 n, const double* __restrict__ r, const double* __restrict__ v,
    double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(bicg_s)) {
        if (stopped(sc)) return;
        const double alpha = sc[ALPHA];
        double ss = 0.0;
        GRID_STRIDE(i, n) {
            const double si = r[i] - alpha * v[i];
            s[i] = si;
            ss += si * si;
        }
        double total, unused;
        if (iteration_sums(block_sum(ss), 0.0, partial, counter, sc, total, unused)) {
            const double snorm = sqrt(total) / sc[BNORM];
            if (snorm <= sc[HALF_TOL]) {
                const double it = sc[ITER] + 1;
                sc[ITER] = it;
                sc[HIST + (i64)it % HIST_LEN] = snorm;
                sc[STATUS] = HALF_STEP;
            }
        }
    }
}

// BiCGSTAB: OMEGA = (t, s) / (t, t); a zero (t, t) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_omega(i64 n, const double* __restrict__ t,
    const double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
    if constexpr (WANTED(bicg_omega)) {
        if (stopped(sc)) return;
        double ts = 0.0, tt = 0.0;
        GRID_STRIDE(i, n) {
            ts += t[i] * s[i];
            tt += t[i] * t[i];
        }
        double ts_total, tt_total;
        if (iteration_sums(block_sum(ts), block_sum(tt), partial, counter, sc, ts_total, tt_total)) {
            if (tt_total == 0.0 || !isfinite(tt_total)) {
                sc[VALUE] = tt_total;
                sc[STATUS] = BREAK_TT;
            } else {
                sc[OMEGA] = ts_total / tt_total;
            }
        }
    }
}

// BiCGSTAB's end of iteration in one pass: x += ALPHA phat + OMEGA shat;
// r = s - OMEGA t, with (r, r) and the next rho = (r0, r). After a HALF_STEP,
// only x += ALPHA phat, and the solve has converged.
extern "C" __global__ void __launch_bounds__(256) bicg_update(i64 n, const double* __restrict__ phat,
    const double* __restrict__ shat, const double* __restrict__ s, const double* __restrict__ t,
    const double* __restrict__ rhat, double* __restrict__ x, double* __restrict__ r, double* partial,
    unsigned int* counter, double* sc) {
    if constexpr (WANTED(bicg_update)) {
        const double status = sc[STATUS];
        if (status != RUNNING && status != HALF_STEP) return;
        const bool half = status == HALF_STEP;
        const double alpha = sc[ALPHA], omega = half ? 0.0 : sc[OMEGA];
        double rr = 0.0, rho = 0.0;
        GRID_STRIDE(i, n) {
            if (half) {
                x[i] += alpha * phat[i];
                continue;
            }
            x[i] += alpha * phat[i] + omega * shat[i];
            const double ri = s[i] - omega * t[i];
            r[i] = ri;
            rr += ri * ri;
            rho += ri * rhat[i];
        }
        double rr_total, rho_total;
        if (iteration_sums(block_sum(rr), block_sum(rho), partial, counter, sc, rr_total, rho_total)) {
            if (half) {
                sc[STATUS] = CONVERGED;
                return;
            }
            const bool going = end_iteration(sc, rr_total);
            // kept on convergence too: a split solve may resume (src/krylov/cuda.rs device_loop)
            sc[RHO_PREV] = sc[RHO];
            sc[RHO] = rho_total;
            if (!going) return;
            if (omega == 0.0) {
                sc[STATUS] = BREAK_OMEGA;
                return;
            }
            stop_at_maxit(sc);
            if (sc[STATUS] == RUNNING && (rho_total == 0.0 || !isfinite(rho_total))) {
                sc[VALUE] = rho_total;
                sc[STATUS] = BREAK_RHO;
            }
        }
    }
}

// ---- BiCGSTAB for small systems: an iteration in one launch ----
//
// For a few thousand rows a launch costs more than its work, and the graph
// of a BiCGSTAB iteration holds about sixteen. Here one launch runs the
// whole iteration (the same steps, scalars and stops as bicg_direction ...
// bicg_update), with barriers instead of launches, written once
// (bicgstab_small) over where the rows live:
// - InCluster: a thread-block cluster (sm_90) whose blocks hold the matrix,
//   the factors and the vectors in shared memory, block q the rows
//   [q R, (q + 1) R), several iterations a launch. A block reads another's
//   rows through distributed shared memory, and the blocks meet at the
//   cluster's barrier. The grid's launches wait on chains of loads from L2,
//   which shared memory shortens; taken first where the system fits
//   (src/krylov/cuda.rs CLUSTER_SYSTEM_ROWS);
// - OneBlock: one block of 1024 threads over the vectors in global memory
//   (up to SMALL_SYSTEM_ROWS, where no cluster is taken).
// The operator is a CSR matrix; the preconditioner none (kind 0), a
// diagonal inverse (1), or ILU(0)'s factors with Jacobi-swept triangles (2).

// The vectors of the iteration; SV_A, SV_B: the sweeps' scratch; SV_M: the
// diagonal inverse (kind 1), or U's diagonal (kind 2, InCluster only).
enum SmallVector { SV_X, SV_R, SV_RHAT, SV_P, SV_PHAT, SV_V, SV_S, SV_SHAT, SV_T, SV_A, SV_B, SV_M, SMALL_VECTORS };

// Two block sums with one barrier, each in block_sum's order (the same
// bits), valid in thread 0. The caller's next barrier frees warp_sums.
__device__ double2 block_sums(double a, double b) {
    __shared__ double2 warp_sums[32];
    for (int off = 16; off > 0; off >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, off);
        b += __shfl_down_sync(0xffffffffu, b, off);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = make_double2(a, b);
    __syncthreads();
    double2 t = (threadIdx.x < (blockDim.x >> 5)) ? warp_sums[threadIdx.x] : make_double2(0.0, 0.0);
    if (warp == 0)
        for (int off = 16; off > 0; off >>= 1) {
            t.x += __shfl_down_sync(0xffffffffu, t.x, off);
            t.y += __shfl_down_sync(0xffffffffu, t.y, off);
        }
    return t;
}

// One block over the vectors in global memory; lu: ILU(0)'s factors (kind 2).
struct OneBlock {
    static constexpr int BLOCK = 1;  // scalar rows
    int n;
    const int *rp, *ci, *diag;
    const double *val, *lu;
    double* v[SMALL_VECTORS];
    __device__ double* vec(int k) const { return v[k]; }
    template <class F>
    __device__ void rows(F f) const {
        for (int i = threadIdx.x; i < n; i += blockDim.x) f(i);
    }
    __device__ void sync() const { __syncthreads(); }
    __device__ bool lead() const { return threadIdx.x == 0; }
    __device__ double2 totals(double a, double b) const {
        __shared__ double2 total;
        const double2 t = block_sums(a, b);
        if (threadIdx.x == 0) total = t;
        __syncthreads();
        const double2 out = total;
        __syncthreads();  // total and the warp sums free again
        return out;
    }
    __device__ void spmv(int in, int out) const {
        const double* x = v[in];
        double* y = v[out];
        rows([&](int i) {
            double s = 0.0;
            for (int k = rp[i]; k < rp[i + 1]; ++k) s += val[k] * x[ci[k]];
            y[i] = s;
        });
        sync();
    }
    // One Jacobi sweep of a triangle (kernels/sparse.cu jacobi_sweep, a row a thread).
    __device__ void sweep(bool upper, bool scale_in, int rhs, int in, int out) const {
        const double *y = v[rhs], *x = v[in];
        double* o = v[out];
        rows([&](int i) {
            const int b = upper ? diag[i] + 1 : rp[i], e = upper ? rp[i + 1] : diag[i];
            double s = 0.0;
            for (int k = b; k < e; ++k) {
                const int j = ci[k];
                s += lu[k] * (scale_in ? x[j] / lu[diag[j]] : x[j]);
            }
            o[i] = upper ? (y[i] - s) / lu[diag[i]] : y[i] - s;
        });
        sync();
    }
    __device__ double diagonal(int i) const { return lu[diag[i]]; }
};

// The address of `p` (this block's shared memory) in block `rank` of the cluster.
__device__ __forceinline__ void* cluster_map(const void* p, int rank) {
    u64 out;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"(p), "r"(rank));
    return (void*)out;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

#define CLUSTER_MAX 16

// A cluster's blocks, the rows in their shared memory: m rows here, their
// entries (val, lu) at local row pointers rp, dg each row's diagonal entry;
// vector k's rows at room + k R, at the same offset in every block. Each
// entry's column is kept as the shared::cluster address of its row of
// vector 0 in the block that holds it, so a read of another block's row is
// one load, not a look-up of that block's vector first.
struct InCluster {
    static constexpr int BLOCK = 1;  // scalar rows
    int m, rank, blocks, R;
    const int *rp, *dg;
    const unsigned* col;
    const double *val, *lu;
    double* room;
    double2* slots;  // two reductions' partial sums, used in turn
    int turn;
    __device__ double* vec(int k) const { return room + (i64)k * R; }
    template <class F>
    __device__ void rows(F f) const {
        for (int i = threadIdx.x; i < m; i += blockDim.x) f(i);
    }
    __device__ double at(int k, unsigned c) const {
        double v;
        asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(c + (unsigned)(k * R) * 8u));
        return v;
    }
    __device__ void sync() const { cluster_sync(); }
    __device__ bool lead() const { return rank == 0 && threadIdx.x == 0; }
    // Every thread adds the blocks' sums in rank order: the same totals, the
    // same branches. The slot written here is read by the others before
    // any block passes the next barrier, so the slot after next may be reused.
    __device__ double2 totals(double a, double b) {
        const double2 sums = block_sums(a, b);
        double2* slot = slots + turn;
        turn ^= 1;
        if (threadIdx.x == 0) *slot = sums;
        sync();  // also frees block_sums' warp sums
        double2 t = make_double2(0.0, 0.0);
        for (int q = 0; q < blocks; ++q) {
            const double2 u = *(const double2*)cluster_map(slot, q);
            t.x += u.x;
            t.y += u.y;
        }
        return t;
    }
    __device__ void spmv(int in, int out) const {
        double* y = vec(out);
        rows([&](int i) {
            double s = 0.0;
            for (int k = rp[i]; k < rp[i + 1]; ++k) s += val[k] * at(in, col[k]);
            y[i] = s;
        });
        sync();
    }
    __device__ void sweep(bool upper, bool scale_in, int rhs, int in, int out) const {
        const double *y = vec(rhs), *d = vec(SV_M);
        double* o = vec(out);
        rows([&](int i) {
            const int b = upper ? dg[i] + 1 : rp[i], e = upper ? rp[i + 1] : dg[i];
            double s = 0.0;
            for (int k = b; k < e; ++k) {
                const unsigned c = col[k];
                s += lu[k] * (scale_in ? at(in, c) / at(SV_M, c) : at(in, c));
            }
            o[i] = upper ? (y[i] - s) / d[i] : y[i] - s;
        });
        sync();
    }
};

// The same cluster over a BSR matrix of K x K blocks (column-major): the
// vectors' rows in shared memory as InCluster (R a multiple of K), a thread
// a block row; rp, dg, col over this block's mb block rows, col[k] the
// address of block column ci[k]'s first row. The values and factors stay in
// global memory (val, lu: this block's first entry), where the L2 keeps
// them: with the vectors they would not fit the cluster's shared memory.
template <int K>
struct InBlockCluster : InCluster {
    static constexpr int BLOCK = K;
    int mb;
    template <class F>
    __device__ void block_rows(F f) const {
        for (int i = threadIdx.x; i < mb; i += blockDim.x) f(i);
    }
    __device__ void gather(int k, unsigned c, double* xb) const {
#pragma unroll
        for (int u = 0; u < K; ++u) xb[u] = at(k, c + 8u * u);
    }
    __device__ void spmv(int in, int out) const {
        double* y = vec(out);
        block_rows([&](int i) {
            double acc[K] = {}, xb[K];
            for (int k = rp[i]; k < rp[i + 1]; ++k) {
                gather(in, col[k], xb);
                add_mat_vec<K>(val + (i64)k * K * K, xb, acc, 1.0);
            }
#pragma unroll
            for (int u = 0; u < K; ++u) y[i * K + u] = acc[u];
        });
        sync();
    }
    // One Jacobi sweep of a block triangle (kernels/block.cu bilu0_row):
    // lower, out = rhs - L_s in; upper, out = U_d^-1 (rhs - U_s in), U_d^-1
    // being the pivot block the factorisation inverted (scale_in: InCluster's only).
    __device__ void sweep(bool upper, bool, int rhs, int in, int out) const {
        const double* y = vec(rhs);
        double* o = vec(out);
        block_rows([&](int i) {
            double acc[K], xb[K];
#pragma unroll
            for (int u = 0; u < K; ++u) acc[u] = y[i * K + u];
            const int b = upper ? dg[i] + 1 : rp[i], e = upper ? rp[i + 1] : dg[i];
            for (int k = b; k < e; ++k) {
                gather(in, col[k], xb);
                add_mat_vec<K>(lu + (i64)k * K * K, xb, acc, -1.0);
            }
            if (upper) {
                double d[K] = {};
                add_mat_vec<K>(lu + (i64)dg[i] * K * K, acc, d, 1.0);
#pragma unroll
                for (int u = 0; u < K; ++u) acc[u] = d[u];
            }
#pragma unroll
            for (int u = 0; u < K; ++u) o[i * K + u] = acc[u];
        });
        sync();
    }
    // out = U_d^-1 rhs: the upper sweeps' start (kernels/block.cu bilu0_diag).
    __device__ void diagonal_start(int rhs, int out) const {
        const double* y = vec(rhs);
        double* o = vec(out);
        block_rows([&](int i) {
            double d[K] = {};
            add_mat_vec<K>(lu + (i64)dg[i] * K * K, y + i * K, d, 1.0);
#pragma unroll
            for (int u = 0; u < K; ++u) o[i * K + u] = d[u];
        });
        sync();
    }
};

// z = M^-1 r (kind 0 never comes here: the iteration uses r itself).
template <class G>
__device__ void small_precond(G& g, int kind, int sweeps, int r, int z) {
    if (kind == 1) {
        const double *m = g.vec(SV_M), *in = g.vec(r);
        double* out = g.vec(z);
        g.rows([&](int i) { out[i] = m[i] * in[i]; });
        g.sync();
        return;
    }
    int y = r;
    for (int s = 0; s < sweeps; ++s) {
        const int out = (s % 2 == 0) ? SV_A : SV_B;
        g.sweep(false, false, r, y, out);
        y = out;
    }
    const int other = (y == SV_A) ? SV_B : SV_A;
    if constexpr (G::BLOCK > 1) {
        // the start U_d^-1 y, then the sweeps: write w lands in z when sweeps - w is even
        const auto target = [&](int w) { return (sweeps - w) % 2 == 0 ? z : other; };
        g.diagonal_start(y, target(0));
        for (int w = 1; w <= sweeps; ++w) g.sweep(true, false, y, target(w - 1), target(w));
        return;
    }
    int from = y;
    for (int s = 0; s < sweeps; ++s) {
        const int out = ((sweeps - 1 - s) % 2 == 0) ? z : other;
        g.sweep(true, s == 0, y, from, out);
        from = out;
    }
}

// One iteration. Every sc value it reads is read before its first barrier,
// so the lead's writes (at the end) race with no block's reads.
template <class G>
__device__ void bicgstab_small(G& g, int kind, int sweeps, double* sc) {
    const bool lead = g.lead();
    const double rho = sc[RHO], it = sc[ITER], bnorm = sc[BNORM], tol = sc[TOL];
    const double beta = it == 0 ? 0.0 : (rho / sc[RHO_PREV]) * (sc[ALPHA] / sc[OMEGA]), omega_prev = sc[OMEGA];
    double *x = g.vec(SV_X), *r = g.vec(SV_R), *rhat = g.vec(SV_RHAT), *p = g.vec(SV_P), *v = g.vec(SV_V);
    double *s = g.vec(SV_S), *t = g.vec(SV_T);
    const int phat = kind == 0 ? SV_P : SV_PHAT, shat = kind == 0 ? SV_S : SV_SHAT;
    g.rows([&](int i) { p[i] = it == 0 ? r[i] : r[i] + beta * (p[i] - omega_prev * v[i]); });
    g.sync();
    if (kind != 0) small_precond(g, kind, sweeps, SV_P, SV_PHAT);
    g.spmv(phat, SV_V);
    double acc = 0.0;
    g.rows([&](int i) { acc += rhat[i] * v[i]; });
    const double rv = g.totals(acc, 0.0).x;
    if (rv == 0.0 || !isfinite(rv)) {
        if (lead) sc[VALUE] = rv, sc[STATUS] = BREAK_RV;
        return;
    }
    const double alpha = rho / rv;
    acc = 0.0;
    g.rows([&](int i) {
        const double si = r[i] - alpha * v[i];
        s[i] = si;
        acc += si * si;
    });
    const double snorm = sqrt(g.totals(acc, 0.0).x) / bnorm;
    const double* ph = g.vec(phat);
    if (snorm <= tol) {
        g.rows([&](int i) { x[i] += alpha * ph[i]; });
        if (lead) sc[ALPHA] = alpha, sc[ITER] = it + 1, sc[HIST + (i64)(it + 1) % HIST_LEN] = snorm, sc[STATUS] = CONVERGED;
        return;
    }
    if (kind != 0) small_precond(g, kind, sweeps, SV_S, SV_SHAT);
    g.spmv(shat, SV_T);
    double ts = 0.0, tt = 0.0;
    g.rows([&](int i) { ts += t[i] * s[i], tt += t[i] * t[i]; });
    const double2 tst = g.totals(ts, tt);
    if (tst.y == 0.0 || !isfinite(tst.y)) {
        if (lead) sc[VALUE] = tst.y, sc[STATUS] = BREAK_TT;
        return;
    }
    const double omega = tst.x / tst.y;
    const double* sh = g.vec(shat);
    double rr = 0.0, rho_next = 0.0;
    g.rows([&](int i) {
        x[i] += alpha * ph[i] + omega * sh[i];
        const double ri = s[i] - omega * t[i];
        r[i] = ri;
        rr += ri * ri;
        rho_next += ri * rhat[i];
    });
    const double2 sums = g.totals(rr, rho_next);
    if (!lead) return;
    sc[ALPHA] = alpha;
    sc[OMEGA] = omega;
    if (!end_iteration(sc, sums.x)) return;
    if (omega == 0.0) {
        sc[STATUS] = BREAK_OMEGA;
        return;
    }
    stop_at_maxit(sc);
    sc[RHO_PREV] = rho;
    sc[RHO] = sums.y;
    if (sc[STATUS] == RUNNING && (sums.y == 0.0 || !isfinite(sums.y))) {
        sc[VALUE] = sums.y;
        sc[STATUS] = BREAK_RHO;
    }
}

extern "C" __global__ void __launch_bounds__(1024) bicgstab_block(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const double* __restrict__ val, const int* __restrict__ diag, int kind,
    const double* __restrict__ m, int sweeps, double* sa, double* sb, double* x, double* r, const double* rhat,
    double* p, double* phat, double* v, double* s, double* shat, double* t, double* sc) {
    if constexpr (WANTED(bicgstab_block)) {
        if (stopped(sc)) return;
        OneBlock g{n, rp, ci, diag, val, m, {x, r, (double*)rhat, p, phat, v, s, shat, t, sa, sb, (double*)m}};
        bicgstab_small(g, kind, sweeps, sc);
    }
}

// One cluster of gridDim.x blocks (at most CLUSTER_MAX), each R rows (the
// last fewer) and room for E entries, `iterations` iterations a launch
// (the system is loaded once): the vectors x, r, rhat, p, v are read from
// global memory and x, r, p, v written back; the rest live only in shared
// memory. Dynamic shared memory, in this order: SMALL_VECTORS x R
// doubles, E values of A, E of the factors (kind 2), then R + 1 row
// pointers, E columns (as addresses, InCluster), R diagonal positions (src/krylov/cuda.rs
// `cluster_shared` sizes it). With K > 1 (InBlockCluster) the pattern is
// over block rows (R / K of them a block, E block entries) and the values
// and factors are not copied.
template <int K>
__device__ void bicgstab_cluster_of(int n, int R, int E, const int* __restrict__ rp, const int* __restrict__ ci,
    const double* __restrict__ val, const int* __restrict__ diag, int kind, const double* __restrict__ m, int sweeps,
    int iterations, double* x, double* r, const double* rhat, double* p, double* v, double* sc) {
    if (stopped(sc)) return;
    extern __shared__ double room[];
    __shared__ unsigned far[CLUSTER_MAX];  // block q's room, as a shared::cluster address
    __shared__ double2 slots[2];
    unsigned int rank, blocks;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
    if (threadIdx.x < blocks) {
        unsigned a;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"((unsigned)__cvta_generic_to_shared(room)), "r"(threadIdx.x));
        far[threadIdx.x] = a;
    }
    __syncthreads();
    const int r0 = (int)rank * R, rows = max(0, min(R, n - r0));
    const int b0 = r0 / K, nb = n / K, mb = rows / K;  // block rows
    const int base = rp[min(b0, nb)], entries = rp[min(b0 + mb, nb)] - base;
    InBlockCluster<K> g;
    g.m = rows, g.mb = mb, g.rank = (int)rank, g.blocks = (int)blocks, g.R = R, g.turn = 0, g.slots = slots, g.room = room;
    const bool copied = K == 1;  // the values in shared memory
    double* a = room + (i64)SMALL_VECTORS * R;
    double* lu = a + (copied ? E : 0);
    int* lrp = (int*)(lu + (copied && kind == 2 ? E : 0));
    unsigned* col = (unsigned*)(lrp + R / K + 1);
    int* dg = (int*)(col + E);
    g.val = copied ? a : val + (i64)base * K * K, g.lu = copied ? lu : m + (i64)base * K * K;
    g.rp = lrp, g.col = col, g.dg = dg;
    for (int i = threadIdx.x; i <= mb; i += blockDim.x) lrp[i] = rp[min(b0 + i, nb)] - base;
    for (int k = threadIdx.x; k < entries; k += blockDim.x) {
        const int c = ci[base + k] * K;
        col[k] = far[c / R] + (unsigned)(c % R) * 8u;
        if (copied) {
            a[k] = val[base + k];
            if (kind == 2) lu[k] = m[base + k];
        }
    }
    const int own[] = {SV_X, SV_R, SV_RHAT, SV_P, SV_V};
    const double* from[] = {x, r, rhat, p, v};
#pragma unroll
    for (int j = 0; j < 5; ++j)
        for (int i = threadIdx.x; i < rows; i += blockDim.x) g.vec(own[j])[i] = from[j][r0 + i];
    for (int i = threadIdx.x; i < mb; i += blockDim.x) {
        if (kind == 2) dg[i] = diag[b0 + i] - base;
        if (copied && kind != 0) g.vec(SV_M)[i] = kind == 1 ? m[r0 + i] : m[diag[r0 + i]];
    }
    cluster_sync();
    for (int k = 0; k < iterations; ++k) {
        if (k > 0) {
            cluster_sync();  // the lead's scalars, then every block reads them
            if (stopped(sc)) break;
        }
        if constexpr (K == 1)
            bicgstab_small(static_cast<InCluster&>(g), kind, sweeps, sc);
        else
            bicgstab_small(g, kind, sweeps, sc);
    }
    __syncthreads();
    double* to[] = {x, r, p, v};
    const int back[] = {SV_X, SV_R, SV_P, SV_V};
#pragma unroll
    for (int j = 0; j < 4; ++j)
        for (int i = threadIdx.x; i < rows; i += blockDim.x) to[j][r0 + i] = g.vec(back[j])[i];
    cluster_sync();  // no block leaves while another may read its shared memory
}

#define BICGSTAB_CLUSTER(NAME, K)                                                                                 \
    extern "C" __global__ void __launch_bounds__(1024) NAME(int n, int R, int E, const int* __restrict__ rp,     \
        const int* __restrict__ ci, const double* __restrict__ val, const int* __restrict__ diag, int kind,     \
        const double* __restrict__ m, int sweeps, int iterations, double* x, double* r, const double* rhat,     \
        double* p, double* v, double* sc) {                                                                      \
        if constexpr (WANTED(NAME))                                                                              \
            bicgstab_cluster_of<K>(n, R, E, rp, ci, val, diag, kind, m, sweeps, iterations, x, r, rhat, p, v, sc); \
    }
BICGSTAB_CLUSTER(bicgstab_cluster, 1)
BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k2, 2) BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k3, 3)
BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k4, 4) BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k5, 5)
BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k6, 6) BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k7, 7)
BICGSTAB_CLUSTER(bicgstab_cluster_bsr_k8, 8)

// ---- A distributed product's halo, device to device between the ranks of
// one node (src/dist/team.rs) ----
// The owner writes the values a neighbour needs straight into the
// neighbour's halo, then counts the message in the neighbour's flag for it;
// the neighbour waits for the count before its halo product.
//
// Why no rank overwrites a halo still being read: these run only inside a
// device-driven iteration, where a global reduction (team_sums) follows
// every product, and a rank sends its sum only after its own halo product.

// The team table after its regions: per destination (T_DESTS of them) the
// address of this rank's run in its halo, the address of its flag for this
// rank, and where the run starts in `rows` and how long it is; then the
// source ranks (T_SOURCES of them).
__device__ __forceinline__ const u64* team_dests(const u64* t) { return t + T_REGION + t[T_SIZE]; }
__device__ __forceinline__ const u64* team_sources(const u64* t) { return team_dests(t) + 4 * t[T_DESTS]; }

// Gathers x[rows] into every destination's halo; the last block to finish
// counts the message in each destination's flag.
extern "C" __global__ void __launch_bounds__(256) halo_send(u64* t, const double* __restrict__ x,
    const int* __restrict__ rows, unsigned int* counter, const double* sc) {
    if constexpr (WANTED(halo_send)) {
        if (stopped(sc)) return;
        const u64* d = team_dests(t);
        const int dests = (int)t[T_DESTS];
        for (int j = 0; j < dests; j++) {
            double* out = (double*)d[4 * j];
            const i64 start = (i64)d[4 * j + 2], count = (i64)d[4 * j + 3];
            GRID_STRIDE(i, count) out[i] = x[rows[start + i]];
        }
        __shared__ bool last;
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence_system();  // this block's values reach the neighbours before the count does
            last = (atomicAdd(counter, 1u) == gridDim.x - 1);
        }
        __syncthreads();
        if (!last || threadIdx.x != 0) return;
        *counter = 0;
        const u64 seq = t[T_SENT] + 1;
        t[T_SENT] = seq;
        __threadfence_system();
        for (int j = 0; j < dests; j++) store_release((u64*)d[4 * j + 1], seq);
    }
}

// One thread: waits until every source has sent this product's halo.
extern "C" __global__ void halo_wait(u64* t, double* sc) {
    if constexpr (WANTED(halo_wait)) {
        if (stopped(sc)) return;
        const u64 seq = t[T_RECEIVED] + 1;
        t[T_RECEIVED] = seq;
        const u64* flags = (const u64*)t[T_FLAGS];
        const u64* s = team_sources(t);
        for (int j = 0; j < (int)t[T_SOURCES]; j++)
            if (!wait_for_rank(&flags[s[j]], seq, sc, (int)s[j])) return;
    }
}

// ---- Channels: messages counted in flags, for exchanges outside an
// iteration (the split lattice's planes, src/dist/team.rs `Channel`) ----
// A channel table: [count, n, lag, lost, flag address x n]. team_post
// counts one more message in each flag (after the data it announces);
// team_wait counts one more and waits until every flag has reached
// count - lag, or gives up on a flag that does not within
// TEAM_PATIENCE_NS, noting its index + 1 in `lost` (later waits then pass).
enum ChannelWord { C_COUNT, C_FLAGS, C_LAG, C_LOST, C_ADDRESS };

extern "C" __global__ void team_post(u64* ch) {
    if constexpr (WANTED(team_post)) {
        const u64 count = ch[C_COUNT] + 1;
        ch[C_COUNT] = count;
        __threadfence_system();
        for (int j = 0; j < (int)ch[C_FLAGS]; j++) store_release((u64*)ch[C_ADDRESS + j], count);
    }
}

extern "C" __global__ void team_wait(u64* ch) {
    if constexpr (WANTED(team_wait)) {
        const u64 count = ch[C_COUNT] + 1;
        ch[C_COUNT] = count;
        if (ch[C_LOST]) return;
        for (int j = 0; j < (int)ch[C_FLAGS]; j++)
            if (!wait_for((const u64*)ch[C_ADDRESS + j], count - ch[C_LAG])) {
                ch[C_LOST] = j + 1;
                return;
            }
    }
}
