/* Distributed solves as an MPI code would call them: every rank assembles
 * its own rows of one global system (uneven ranges; with 4 ranks, rank 2
 * owns none), then
 *   - the distributed product equals this driver's serial SpMV of the
 *     global matrix;
 *   - distributed CG and BiCGSTAB with Jacobi take the iterations of the
 *     one-process solve of the same global system, with the same residual
 *     history to rounding, and their x leaves a true residual (computed
 *     here, serially) below the tolerance;
 *   - block-Jacobi ILU(0) BiCGSTAB converges;
 *   - new values (the matrix doubled) halve the solution;
 *   - overlapping ranges, a gap, a column outside the matrix on one rank, a
 *     null pointer on one rank, a tolerance that differs between ranks and
 *     MPI_COMM_NULL are refused on every rank, with nothing created.
 * Runs under mpiexec -n 1..4 on whatever backend FEGPU_BACKEND selects. */
#include "dist_checks.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 11
#define NY 10
#define NZ 9
#define N (NX * NY * NZ)

/* Global row i of the 7-point operator: diagonal 6 + c, west -1 - c, the
 * other neighbours -1 (c = 0: the symmetric Laplacian; c > 0: upwind
 * convection). Returns the entries written. */
static int row_entries(int64_t i, double c, int64_t *cols, double *vals) {
    int64_t x = i % NX, y = (i / NX) % NY, z = i / (NX * NY);
    int k = 0;
    int64_t nb[6] = {x > 0 ? i - 1 : -1, x < NX - 1 ? i + 1 : -1, y > 0 ? i - NX : -1,
                     y < NY - 1 ? i + NX : -1, z > 0 ? i - NX * NY : -1, z < NZ - 1 ? i + NX * NY : -1};
    /* neighbours first and the diagonal last: fegpu sorts each row itself */
    for (int d = 0; d < 6; d++)
        if (nb[d] >= 0) {
            cols[k] = nb[d];
            vals[k++] = d == 0 ? -1.0 - c : -1.0;
        }
    cols[k] = i;
    vals[k++] = 6.0 + c;
    return k;
}

/* The rank's share: weights r + 1, except rank 2 of 4, which owns nothing. */
static void my_range(int64_t *first, int64_t *count) {
    double w[64], total = 0, acc = 0;
    for (int r = 0; r < size; r++) total += (w[r] = (size == 4 && r == 2) ? 0.0 : r + 1.0);
    int64_t start = 0;
    for (int r = 0; r <= rank; r++) {
        acc += w[r];
        int64_t end = r == size - 1 ? N : (int64_t)llround(N * acc / total);
        if (r == rank) {
            *first = start;
            *count = end - start;
        }
        start = end;
    }
}

typedef struct {
    int64_t nrows, nnz, *rp, *ci;
    int32_t *rp32, *ci32;
    double *v;
} Rows;

/* Rows first..first+count-1, both in int64 0-based and int32 1-based form. */
static Rows assemble(int64_t first, int64_t count, double c) {
    Rows r = {count, 0, malloc((count + 1) * 8), malloc(7 * (count + 1) * 8), malloc((count + 1) * 4),
              malloc(7 * (count + 1) * 4), malloc(7 * (count + 1) * 8)};
    r.rp[0] = 0;
    for (int64_t i = 0; i < count; i++) r.rp[i + 1] = r.rp[i] + row_entries(first + i, c, r.ci + r.rp[i], r.v + r.rp[i]);
    r.nnz = r.rp[count];
    for (int64_t i = 0; i <= count; i++) r.rp32[i] = (int32_t)r.rp[i] + 1;
    for (int64_t k = 0; k < r.nnz; k++) r.ci32[k] = (int32_t)r.ci[k] + 1;
    return r;
}

static void release(Rows *r) {
    free(r->rp), free(r->ci), free(r->rp32), free(r->ci32), free(r->v);
}

/* ||b - A x|| / ||b|| of the whole system, serially, from everyone's x. */
static double true_residual(const double *x_local, int64_t first, int64_t count, const double *b_global, double c) {
    double *x = calloc(N, 8);
    int counts[64], displs[64], mine = (int)count, at = (int)first;
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgather(&at, 1, MPI_INT, displs, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Allgatherv(x_local, mine, MPI_DOUBLE, x, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    double rr = 0, bb = 0;
    int64_t cols[7];
    double vals[7];
    for (int64_t i = 0; i < N; i++) {
        int k = row_entries(i, c, cols, vals);
        double s = b_global[i];
        for (int j = 0; j < k; j++) s -= vals[j] * x[cols[j]];
        rr += s * s;
        bb += b_global[i] * b_global[i];
    }
    free(x);
    return sqrt(rr / bb);
}

/* The one-process solve of the whole system (this rank alone, its own context). */
static int64_t reference_solve(fegpu_context_t ctx, double c, int method, const double *b, double *x, double *hist, int64_t cap) {
    Rows all = assemble(0, N, c);
    fegpu_csr_t a = 0;
    fegpu_solver_t s = 0;
    fegpu_array_t db = 0, dx = 0;
    int64_t count = 0;
    expect(fegpu_csr_create_i64(ctx, N, N, all.nnz, all.rp, all.ci, all.v, 0, &a) == FEGPU_OK, "reference matrix");
    expect(fegpu_solver_create(a, method, FEGPU_PRECOND_JACOBI, &s) == FEGPU_OK, "reference solver");
    memset(x, 0, N * 8);
    fegpu_array_create_f64(ctx, N, 1, b, &db);
    fegpu_array_create_f64(ctx, N, 1, x, &dx);
    expect(fegpu_solver_solve(s, db, dx, 1e-10, 2000, NULL) == FEGPU_OK, "reference solve");
    fegpu_array_download_f64(dx, x, N);
    fegpu_solver_history(s, hist, cap, &count);
    fegpu_solver_destroy(s), fegpu_csr_destroy(a), fegpu_array_destroy(db), fegpu_array_destroy(dx);
    release(&all);
    return count;
}

/* Creates this rank's rows of the matrix of convection c (NULL handle out on failure). */
static int create(fegpu_context_t ctx, MPI_Comm comm, int64_t first, Rows *r, int one_based, fegpu_dist_csr_t *a) {
    if (one_based)
        return fegpu_dist_csr_create_i32(ctx, fegpu_comm(comm), N, first + 1, r->nrows, r->rp32, r->ci32, r->v, 1, a);
    return fegpu_dist_csr_create_i64(ctx, fegpu_comm(comm), N, first, r->nrows, r->rp, r->ci, r->v, 0, a);
}

static void bad_inputs(fegpu_context_t ctx, int64_t first, Rows *r) {
    fegpu_dist_csr_t a = 0;
    char msg[512];
    /* overlapping ranges (one rank only: a gap) */
    int64_t shifted = rank > 0 ? first - 1 : (size == 1 ? 1 : first);
    int st = fegpu_dist_csr_create_i64(ctx, fegpu_comm(MPI_COMM_WORLD), N, shifted, r->nrows, r->rp, r->ci, r->v, 0, &a);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && a == 0, "overlapping or gapped ranges refused on every rank");
    snprintf(msg, sizeof msg, "%s", last_error());
    expect(strstr(msg, "overlap") || strstr(msg, "gap") || strstr(msg, "n_global"), "the range message says what is wrong");
    /* a column outside the matrix, on the last rank only */
    int64_t saved = r->nnz ? r->ci[0] : 0;
    if (rank == size - 1 && r->nnz) r->ci[0] = N;
    st = fegpu_dist_csr_create_i64(ctx, fegpu_comm(MPI_COMM_WORLD), N, first, r->nrows, r->rp, r->ci, r->v, 0, &a);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && a == 0, "a column outside the matrix on one rank refused on every rank");
    if (rank != size - 1) expect(strncmp(last_error(), "rank ", 5) == 0, "other ranks are told which rank failed");
    if (r->nnz) r->ci[0] = saved;
    /* a null values pointer on rank 0 */
    st = fegpu_dist_csr_create_i64(ctx, fegpu_comm(MPI_COMM_WORLD), N, first, r->nrows, r->rp, r->ci, rank == 0 ? NULL : r->v, 0,
                                   &a);
    expect(st != FEGPU_OK && a == 0, "a null pointer on one rank refused on every rank");
    /* no communicator */
    st = fegpu_dist_csr_create_i64(ctx, fegpu_comm(MPI_COMM_NULL), N, first, r->nrows, r->rp, r->ci, r->v, 0, &a);
    expect(st == FEGPU_ERR_INVALID_HANDLE && a == 0, "MPI_COMM_NULL refused");
}

int main(int argc, char **argv) {
    fegpu_context_t ctx = start(&argc, &argv);
    int64_t first, count;
    my_range(&first, &count);
    double *b = malloc(N * 8), *x_ref = malloc(N * 8), *h_ref = malloc(4096 * 8), *h = malloc(4096 * 8);
    double *x = calloc(count + 1, 8), *y = calloc(count + 1, 8);
    for (int64_t i = 0; i < N; i++) b[i] = 1.0 + sin(0.37 * (double)i);

    Rows sym = assemble(first, count, 0.0), conv = assemble(first, count, 2.5);
    bad_inputs(ctx, first, &sym);

    const struct { double c; int method, one_based; const char *name; } cases[4] = {
        {0.0, FEGPU_METHOD_CG, 0, "CG"}, {2.5, FEGPU_METHOD_BICGSTAB, 1, "BiCGSTAB"},
        {2.5, FEGPU_METHOD_GMRES, 0, "GMRES(30)"}, {2.5, FEGPU_METHOD_CGS, 1, "CGS"}};
    for (int t = 0; t < 4; t++) {
        Rows *r = cases[t].c == 0.0 ? &sym : &conv;
        fegpu_dist_csr_t a = 0;
        fegpu_dist_solver_t s = 0;
        fegpu_array_t db = 0, dx = 0, dy = 0;
        expect(create(ctx, MPI_COMM_WORLD, first, r, cases[t].one_based, &a) == FEGPU_OK, "distributed matrix");
        if (count > 0) {
            fegpu_array_create_f64(ctx, count, 1, b + first, &db);
            for (int64_t i = 0; i < count; i++) x[i] = cos(0.11 * (double)(first + i));
            fegpu_array_create_f64(ctx, count, 1, x, &dx);
            fegpu_array_create_f64(ctx, count, 1, x, &dy);
        }
        /* the product against this driver's serial SpMV of the global matrix */
        expect(fegpu_dist_csr_spmv(a, dx, dy) == FEGPU_OK, "distributed SpMV");
        if (count > 0) fegpu_array_download_f64(dy, y, count);
        for (int64_t i = 0; i < count; i++) {
            int64_t cols[7];
            double vals[7], s_ = 0;
            int k = row_entries(first + i, cases[t].c, cols, vals);
            for (int j = 0; j < k; j++) s_ += vals[j] * cos(0.11 * (double)cols[j]);
            if (fabs(s_ - y[i]) > 1e-12 * (1 + fabs(s_))) {
                expect(0, "SpMV row equals the serial product");
                break;
            }
        }
        /* Jacobi: the one-process iterations and history */
        expect(fegpu_dist_solver_create(a, cases[t].method, FEGPU_PRECOND_JACOBI, &s) == FEGPU_OK, "distributed solver");
        memset(x, 0, (count + 1) * 8);
        if (count > 0) fegpu_array_upload_f64(dx, x, count);
        fegpu_solve_info info;
        expect(fegpu_dist_solver_solve(s, db, dx, 1e-10, 2000, &info) == FEGPU_OK, "distributed solve converges");
        int64_t nh = 0, nref = reference_solve(ctx, cases[t].c, cases[t].method, b, x_ref, h_ref, 4096);
        fegpu_dist_solver_history(s, h, 4096, &nh);
        if (nh != nref) fprintf(stderr, "rank %d: %s: %ld iterations distributed, %ld in one process\n", rank, cases[t].name, (long)nh - 1, (long)nref - 1);
        expect(nh == nref && nh > 5, "the one-process iteration count");
        /* CGS squares BiCG's residual polynomial, and with it the rounding of the sums' order */
        double close = cases[t].method == FEGPU_METHOD_CGS ? 1e-3 : 1e-6;
        for (int64_t k = 0; k < nh && k < nref; k++)
            if (fabs(h[k] - h_ref[k]) > close * h_ref[k] + 1e-15) {
                fprintf(stderr, "rank %d: %s: history[%ld] = %.17g, one process %.17g\n", rank, cases[t].name, (long)k, h[k], h_ref[k]);
                expect(0, "the one-process residual history to rounding");
                break;
            }
        if (count > 0) fegpu_array_download_f64(dx, x, count);
        double tr = true_residual(x, first, count, b, cases[t].c);
        expect(tr < 1e-9, "true residual of the distributed x, computed serially");
        for (int64_t i = 0; i < count; i++)
            if (fabs(x[i] - x_ref[first + i]) > 1e-8 * (1 + fabs(x_ref[first + i]))) {
                expect(0, "x equals the one-process x");
                break;
            }
        /* a tolerance that differs between ranks is refused everywhere */
        if (size > 1) {
            int st = fegpu_dist_solver_solve(s, db, dx, rank == 0 ? 1e-8 : 1e-9, 100, NULL);
            expect(st == FEGPU_ERR_INVALID_ARGUMENT, "different tolerances refused on every rank");
        }
        if (t == 0) {
            /* new values: A doubled halves x */
            double *v2 = malloc((r->nnz + 1) * 8);
            for (int64_t k = 0; k < r->nnz; k++) v2[k] = 2.0 * r->v[k];
            expect(fegpu_dist_csr_update_values(a, v2, r->nnz) == FEGPU_OK, "update values");
            double *x2 = calloc(count + 1, 8);
            if (count > 0) fegpu_array_upload_f64(dx, x2, count);
            expect(fegpu_dist_solver_solve(s, db, dx, 1e-10, 2000, NULL) == FEGPU_OK, "solve after update");
            if (count > 0) fegpu_array_download_f64(dx, x2, count);
            for (int64_t i = 0; i < count; i++)
                if (fabs(2.0 * x2[i] - x[i]) > 1e-7 * (1 + fabs(x[i]))) {
                    expect(0, "doubled matrix halves x");
                    break;
                }
            free(v2), free(x2);
        } else if (t == 1) {
            /* BiCG's A^T product would need the halo sent backwards: refused on every rank */
            fegpu_dist_solver_t sb = 0;
            expect(fegpu_dist_solver_create(a, FEGPU_METHOD_BICG, FEGPU_PRECOND_JACOBI, &sb) == FEGPU_ERR_UNSUPPORTED,
                   "BiCG refused over the ranks");
            /* block-Jacobi ILU(0) */
            fegpu_dist_solver_t si = 0;
            expect(fegpu_dist_solver_create(a, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, &si) == FEGPU_OK, "block-Jacobi ILU(0)");
            memset(x, 0, (count + 1) * 8);
            if (count > 0) fegpu_array_upload_f64(dx, x, count);
            expect(fegpu_dist_solver_solve(si, db, dx, 1e-10, 2000, &info) == FEGPU_OK, "block-Jacobi ILU(0) converges");
            if (count > 0) fegpu_array_download_f64(dx, x, count);
            expect(true_residual(x, first, count, b, cases[t].c) < 1e-9, "block-Jacobi ILU(0) true residual");
            if (rank == 0) printf("block-Jacobi ILU(0) BiCGSTAB: %ld iterations on %d ranks\n", (long)info.iterations, size);
            fegpu_dist_solver_destroy(si);
        }
        if (rank == 0) {
            char text[512];
            fegpu_dist_csr_describe(a, text, sizeof text, NULL);
            printf("%s Jacobi: %ld iterations on %d ranks, as in one process; %s\n", cases[t].name, (long)nh - 1, size, text);
        }
        fegpu_dist_solver_destroy(s), fegpu_dist_csr_destroy(a);
        if (count > 0) fegpu_array_destroy(db), fegpu_array_destroy(dx), fegpu_array_destroy(dy);
    }
    int total = failures_everywhere("dist_solve");
    release(&sym), release(&conv);
    free(b), free(x_ref), free(h_ref), free(h), free(x), free(y);
    fegpu_context_destroy(ctx);
    MPI_Finalize();
    return total ? 1 : 0;
}
