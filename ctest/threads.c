/* Threads: four threads with a context each, then four threads sharing one
 * context (and one matrix), each doing hundreds of solves of a 1-D Poisson
 * system with its own right-hand sides. Every solution is checked against
 * the host: the residual b - A x recomputed here, and x against the exact
 * solution of the discrete system. */
#include <fegpu.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { N = 80, SOLVES = 200, THREADS = 4 };

static int64_t rp[N + 1], ci[3 * N];
static double vals[3 * N];

static void laplacian(void) {
    int64_t k = 0;
    for (int64_t i = 0; i < N; i++) {
        rp[i] = k;
        if (i > 0) ci[k] = i - 1, vals[k++] = -1;
        ci[k] = i, vals[k++] = 2;
        if (i < N - 1) ci[k] = i + 1, vals[k++] = -1;
    }
    rp[N] = k;
}

struct job {
    fegpu_context_t ctx; /* 0: the thread makes its own */
    fegpu_csr_t shared;  /* 0: the thread makes its own matrix */
    int id, failures;
    double worst;
};

static void *work(void *arg) {
    struct job *j = arg;
    fegpu_context_t ctx = j->ctx;
    int own_ctx = ctx == 0;
    if (own_ctx && fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &ctx) != FEGPU_OK) {
        j->failures = SOLVES;
        return NULL;
    }
    fegpu_csr_t a = j->shared;
    if (!a) fegpu_csr_create_i64(ctx, N, N, rp[N], rp, ci, vals, 0, &a);
    fegpu_solver_t s = 0;
    fegpu_array_t db = 0, dx = 0;
    fegpu_solver_create(a, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, &s);
    fegpu_array_create_empty(ctx, FEGPU_DTYPE_F64, N, 1, &db);
    fegpu_array_create_empty(ctx, FEGPU_DTYPE_F64, N, 1, &dx);
    double xe[N], b[N], x[N];
    for (int n = 0; n < SOLVES; n++) {
        /* exact x: a quadratic that differs per thread and solve; b = A x exactly */
        for (int i = 0; i < N; i++) xe[i] = (j->id + 1) * 0.5 + (n % 17) * 0.01 * i + 1e-3 * i * i;
        for (int i = 0; i < N; i++) b[i] = 2 * xe[i] - (i > 0 ? xe[i - 1] : 0) - (i < N - 1 ? xe[i + 1] : 0);
        memset(x, 0, sizeof x);
        struct fegpu_solve_info info;
        int ok = fegpu_array_upload_f64(db, b, N) == FEGPU_OK && fegpu_array_upload_f64(dx, x, N) == FEGPU_OK &&
                 fegpu_solver_solve(s, db, dx, 1e-12, 1000, &info) == FEGPU_OK && fegpu_array_download_f64(dx, x, N) == FEGPU_OK;
        double err = 0;
        for (int i = 0; i < N; i++) err = fmax(err, fabs(x[i] - xe[i]) / fabs(xe[i]));
        if (!ok || !(err < 1e-8)) {
            char msg[512] = "";
            fegpu_last_error_message(msg, sizeof msg);
            printf("thread %d solve %d: ok %d, error %.2e (%s)\n", j->id, n, ok, err, msg);
            j->failures++;
        }
        if (err > j->worst) j->worst = err;
    }
    fegpu_solver_destroy(s);
    fegpu_array_destroy(db);
    fegpu_array_destroy(dx);
    if (own_ctx) fegpu_context_destroy(ctx);
    return NULL;
}

static int round_of(const char *what, fegpu_context_t ctx, fegpu_csr_t shared) {
    pthread_t t[THREADS];
    struct job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (struct job){ctx, shared, i, 0, 0};
        pthread_create(&t[i], NULL, work, &jobs[i]);
    }
    int failures = 0;
    double worst = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += jobs[i].failures;
        worst = fmax(worst, jobs[i].worst);
    }
    printf("%s: %d threads x %d solves, %d failed, worst relative error %.2e\n", what, THREADS, SOLVES, failures, worst);
    return failures;
}

int main(void) {
    laplacian();
    int bad = 0, rounds = 0;
    bad += round_of("a context per thread", 0, 0) != 0, rounds++;
    fegpu_context_t ctx = 0;
    if (fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &ctx) != FEGPU_OK) return 1;
    bad += round_of("one context, a matrix per thread", ctx, 0) != 0, rounds++;
    fegpu_csr_t a = 0;
    fegpu_csr_create_i64(ctx, N, N, rp[N], rp, ci, vals, 0, &a);
    bad += round_of("one context and one matrix", ctx, a) != 0, rounds++;
    fegpu_context_destroy(ctx);
    printf("%d passed, %d failed\n", rounds - bad, bad);
    return bad != 0;
}
