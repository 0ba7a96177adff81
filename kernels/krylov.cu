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
    if (stopped(sc)) return;
    double s = 0.0;
    GRID_STRIDE(i, n) s += p[i] * q[i];
    double pq, unused;
    if (iteration_sums(block_sum(s), 0.0, partial, counter, sc, pq, unused)) {
        set_pq(sc, pq);
    }
}


// CG's vector step in one pass with alpha = RZ / PQ: x += alpha p; r -= alpha q;
// z = d .* r when d is given (Jacobi; otherwise z is r), then (r.z, r.r) end
// the iteration (BETA = r.z / RZ). With `rz_follows` (ILU(0): z comes from the
// triangular sweeps after this kernel), only RR is stored and cg_rz ends it.
extern "C" __global__ void __launch_bounds__(256) cg_step(i64 n, const double* __restrict__ p,
    const double* __restrict__ q, double* __restrict__ x, double* __restrict__ r, const double* __restrict__ d,
    double* __restrict__ z, int rz_follows, double* partial, unsigned int* counter, double* sc) {
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

// CG with ILU(0): r.z after the sweeps ends the iteration.
extern "C" __global__ void __launch_bounds__(256) cg_rz(i64 n, const double* __restrict__ r, const double* __restrict__ z,
    double* partial, unsigned int* counter, double* sc) {
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

// CG: p = z + BETA p.
extern "C" __global__ void __launch_bounds__(256) cg_direction(i64 n, const double* __restrict__ z, double* __restrict__ p,
    const double* sc) {
    if (stopped(sc)) return;
    const double beta = sc[BETA];
    GRID_STRIDE(i, n) p[i] = z[i] + beta * p[i];
}

// BiCGSTAB: p = r on the first iteration, then p = r + beta (p - OMEGA v)
// with beta = (RHO / RHO_PREV) (ALPHA / OMEGA).
extern "C" __global__ void __launch_bounds__(256) bicg_direction(i64 n, const double* __restrict__ r,
    const double* __restrict__ v, double* __restrict__ p, const double* sc) {
    if (stopped(sc)) return;
    if (sc[ITER] == 0) {
        GRID_STRIDE(i, n) p[i] = r[i];
        return;
    }
    const double omega = sc[OMEGA];
    const double beta = (sc[RHO] / sc[RHO_PREV]) * (sc[ALPHA] / omega);
    GRID_STRIDE(i, n) p[i] = r[i] + beta * (p[i] - omega * v[i]);
}

// BiCGSTAB: ALPHA = RHO / (r0, v); a zero (r0, v) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_alpha(i64 n, const double* __restrict__ rhat,
    const double* __restrict__ v, double* partial, unsigned int* counter, double* sc) {
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

// BiCGSTAB: s = r - ALPHA v; a small enough s ends the iteration half way
// (HALF_STEP: bicg_update then adds only ALPHA phat to x).
extern "C" __global__ void __launch_bounds__(256) bicg_s(i64 n, const double* __restrict__ r, const double* __restrict__ v,
    double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
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
        if (snorm <= sc[TOL]) {
            const double it = sc[ITER] + 1;
            sc[ITER] = it;
            sc[HIST + (i64)it % HIST_LEN] = snorm;
            sc[STATUS] = HALF_STEP;
        }
    }
}

// BiCGSTAB: OMEGA = (t, s) / (t, t); a zero (t, t) is a breakdown.
extern "C" __global__ void __launch_bounds__(256) bicg_omega(i64 n, const double* __restrict__ t,
    const double* __restrict__ s, double* partial, unsigned int* counter, double* sc) {
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

// BiCGSTAB's end of iteration in one pass: x += ALPHA phat + OMEGA shat;
// r = s - OMEGA t, with (r, r) and the next rho = (r0, r). After a HALF_STEP,
// only x += ALPHA phat, and the solve has converged.
extern "C" __global__ void __launch_bounds__(256) bicg_update(i64 n, const double* __restrict__ phat,
    const double* __restrict__ shat, const double* __restrict__ s, const double* __restrict__ t,
    const double* __restrict__ rhat, double* __restrict__ x, double* __restrict__ r, double* partial,
    unsigned int* counter, double* sc) {
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
        if (!end_iteration(sc, rr_total)) return;
        if (omega == 0.0) {
            sc[STATUS] = BREAK_OMEGA;
            return;
        }
        stop_at_maxit(sc);
        sc[RHO_PREV] = sc[RHO];
        sc[RHO] = rho_total;
        if (sc[STATUS] == RUNNING && (rho_total == 0.0 || !isfinite(rho_total))) {
            sc[VALUE] = rho_total;
            sc[STATUS] = BREAK_RHO;
        }
    }
}

// ---- BiCGSTAB for small systems: one block, one launch an iteration ----
//
// For a few thousand rows a launch costs more than its work, and the graph
// of a BiCGSTAB iteration holds about sixteen. Here one block of 1024
// threads runs the whole iteration (the same steps, scalars and stops as
// bicg_direction ... bicg_update), with barriers instead of launches. The
// operator is a CSR matrix; the preconditioner none (kind 0), a diagonal
// inverse (1), or ILU(0)'s factors with Jacobi-swept triangles (2).

// The block's sum of s, in every thread.
__device__ double block_total(double s) {
    __shared__ double total;
    s = block_sum(s);
    if (threadIdx.x == 0) total = s;
    __syncthreads();
    const double t = total;
    __syncthreads();
    return t;
}

__device__ void block_spmv(int n, const int* __restrict__ rp, const int* __restrict__ ci, const double* __restrict__ a,
    const double* x, double* y) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        double s = 0.0;
        for (int k = rp[i]; k < rp[i + 1]; ++k) s += a[k] * x[ci[k]];
        y[i] = s;
    }
    __syncthreads();
}

// One Jacobi sweep of a triangle (kernels/sparse.cu jacobi_sweep, a row a thread).
__device__ void block_sweep(int n, const int* __restrict__ rp, const int* __restrict__ ci, const int* __restrict__ diag,
    const double* __restrict__ lu, const double* y, const double* in, bool upper, bool scale_in, double* out) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int b = upper ? diag[i] + 1 : rp[i], e = upper ? rp[i + 1] : diag[i];
        double s = 0.0;
        for (int k = b; k < e; ++k) {
            const int j = ci[k];
            s += lu[k] * (scale_in ? in[j] / lu[diag[j]] : in[j]);
        }
        out[i] = upper ? (y[i] - s) / lu[diag[i]] : y[i] - s;
    }
    __syncthreads();
}

// z = M^-1 r (kind 0 never comes here: the caller uses r itself).
__device__ void block_precond(int n, const int* rp, const int* ci, const int* diag, int kind, const double* m,
    int sweeps, double* a, double* b, const double* r, double* z) {
    if (kind == 1) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) z[i] = m[i] * r[i];
        __syncthreads();
        return;
    }
    const double* y = r;
    for (int s = 0; s < sweeps; ++s) {
        double* out = (s % 2 == 0) ? a : b;
        block_sweep(n, rp, ci, diag, m, r, y, false, false, out);
        y = out;
    }
    double* other = (y == a) ? b : a;
    const double* from = y;
    for (int s = 0; s < sweeps; ++s) {
        double* out = ((sweeps - 1 - s) % 2 == 0) ? z : other;
        block_sweep(n, rp, ci, diag, m, y, from, true, s == 0, out);
        from = out;
    }
}

extern "C" __global__ void __launch_bounds__(1024) bicgstab_block(int n, const int* __restrict__ rp,
    const int* __restrict__ ci, const double* __restrict__ val, const int* __restrict__ diag, int kind,
    const double* __restrict__ m, int sweeps, double* sa, double* sb, double* x, double* r, const double* rhat,
    double* p, double* phat, double* v, double* s, double* shat, double* t, double* sc) {
    if (stopped(sc)) return;
    const bool lead = threadIdx.x == 0;
    const double rho = sc[RHO], it = sc[ITER];
    const double beta = it == 0 ? 0.0 : (rho / sc[RHO_PREV]) * (sc[ALPHA] / sc[OMEGA]), omega_prev = sc[OMEGA];
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = it == 0 ? r[i] : r[i] + beta * (p[i] - omega_prev * v[i]);
    __syncthreads();
    if (kind != 0) block_precond(n, rp, ci, diag, kind, m, sweeps, sa, sb, p, phat);
    block_spmv(n, rp, ci, val, phat, v);
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) acc += rhat[i] * v[i];
    const double rv = block_total(acc);
    if (rv == 0.0 || !isfinite(rv)) {
        if (lead) sc[VALUE] = rv, sc[STATUS] = BREAK_RV;
        return;
    }
    const double alpha = rho / rv;
    acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const double si = r[i] - alpha * v[i];
        s[i] = si;
        acc += si * si;
    }
    const double snorm = sqrt(block_total(acc)) / sc[BNORM];
    if (snorm <= sc[TOL]) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] += alpha * phat[i];
        if (lead) sc[ALPHA] = alpha, sc[ITER] = it + 1, sc[HIST + (i64)(it + 1) % HIST_LEN] = snorm, sc[STATUS] = CONVERGED;
        return;
    }
    if (kind != 0) block_precond(n, rp, ci, diag, kind, m, sweeps, sa, sb, s, shat);
    block_spmv(n, rp, ci, val, shat, t);
    double ts = 0.0, tt = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ts += t[i] * s[i], tt += t[i] * t[i];
    ts = block_total(ts);
    tt = block_total(tt);
    if (tt == 0.0 || !isfinite(tt)) {
        if (lead) sc[VALUE] = tt, sc[STATUS] = BREAK_TT;
        return;
    }
    const double omega = ts / tt;
    double rr = 0.0, rho_next = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        x[i] += alpha * phat[i] + omega * shat[i];
        const double ri = s[i] - omega * t[i];
        r[i] = ri;
        rr += ri * ri;
        rho_next += ri * rhat[i];
    }
    rr = block_total(rr);
    rho_next = block_total(rho_next);
    if (!lead) return;
    sc[ALPHA] = alpha;
    sc[OMEGA] = omega;
    if (!end_iteration(sc, rr)) return;
    if (omega == 0.0) {
        sc[STATUS] = BREAK_OMEGA;
        return;
    }
    stop_at_maxit(sc);
    sc[RHO_PREV] = rho;
    sc[RHO] = rho_next;
    if (sc[STATUS] == RUNNING && (rho_next == 0.0 || !isfinite(rho_next))) {
        sc[VALUE] = rho_next;
        sc[STATUS] = BREAK_RHO;
    }
}

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

// One thread: waits until every source has sent this product's halo.
extern "C" __global__ void halo_wait(u64* t, double* sc) {
    if (stopped(sc)) return;
    const u64 seq = t[T_RECEIVED] + 1;
    t[T_RECEIVED] = seq;
    const u64* flags = (const u64*)t[T_FLAGS];
    const u64* s = team_sources(t);
    for (int j = 0; j < (int)t[T_SOURCES]; j++)
        if (!wait_for_rank(&flags[s[j]], seq, sc, (int)s[j])) return;
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
    const u64 count = ch[C_COUNT] + 1;
    ch[C_COUNT] = count;
    __threadfence_system();
    for (int j = 0; j < (int)ch[C_FLAGS]; j++) store_release((u64*)ch[C_ADDRESS + j], count);
}

extern "C" __global__ void team_wait(u64* ch) {
    const u64 count = ch[C_COUNT] + 1;
    ch[C_COUNT] = count;
    if (ch[C_LOST]) return;
    for (int j = 0; j < (int)ch[C_FLAGS]; j++)
        if (!wait_for((const u64*)ch[C_ADDRESS + j], count - ch[C_LAG])) {
            ch[C_LOST] = j + 1;
            return;
        }
}
