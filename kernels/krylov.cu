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
    if (last_block_sums(block_sum(s), 0.0, partial, counter, pq, unused)) {
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
    if (last_block_sums(block_sum(s1), block_sum(s2), partial, counter, rz, rr)) {
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
    if (last_block_sums(block_sum(s), 0.0, partial, counter, rz, unused)) {
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
    if (last_block_sums(block_sum(s), 0.0, partial, counter, rv, unused)) {
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
    if (last_block_sums(block_sum(ss), 0.0, partial, counter, total, unused)) {
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
    if (last_block_sums(block_sum(ts), block_sum(tt), partial, counter, ts_total, tt_total)) {
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
    if (last_block_sums(block_sum(rr), block_sum(rho), partial, counter, rr_total, rho_total)) {
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
