/* The classes of bad input that once aborted, hung or lied, from C. Every
 * case runs in a child process with a time limit, so an abort or a hang is
 * a failing check here rather than a dead test runner; each checks the
 * status, a message naming the argument, and that what the call was given
 * is unchanged and still usable afterwards. Files the cases write go under
 * the working directory (CTest's build folder). */
#include <fegpu.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int failed; /* in the child: set by check() */

static void check(int ok, const char *what) {
    if (!ok) {
        failed = 1;
        printf("    FAIL: %s\n", what);
    }
}

/* The call's status is `want` (or `also`, when not 0) and the message holds `word`. */
static void expect(fegpu_status got, fegpu_status want, fegpu_status also, const char *word, const char *what) {
    char msg[1024] = "";
    if (got != FEGPU_OK) fegpu_last_error_message(msg, sizeof msg);
    int ok = (got == want || (also && got == also)) && (!word || strstr(msg, word));
    if (!ok) printf("    status %d (want %d), message \"%s\" (want \"%s\")\n", got, want, msg, word ? word : "");
    else if (got != FEGPU_OK) printf("    %s -> \"%s\"\n", what, msg);
    check(ok, what);
}

static fegpu_context_t context(void) {
    fegpu_context_t ctx = 0;
    expect(fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &ctx), FEGPU_OK, 0, NULL, "create a context");
    return ctx;
}

/* The context still works: a small array goes up and comes back. */
static void still_usable(fegpu_context_t ctx) {
    double x[4] = {1, 2, 3, 4}, y[4] = {0};
    fegpu_array_t a = 0;
    expect(fegpu_array_create_f64(ctx, 2, 2, x, &a), FEGPU_OK, 0, NULL, "a small array after the failure");
    expect(fegpu_array_download_f64(a, y, 4), FEGPU_OK, 0, NULL, "its download");
    check(memcmp(x, y, sizeof x) == 0, "the context still moves data correctly");
}

/* ---- sizes that cannot be allocated ---- */

static void huge_array(void) {
    fegpu_context_t ctx = context();
    fegpu_array_t a = 0;
    expect(fegpu_array_create_empty(ctx, FEGPU_DTYPE_F64, 1000000, 1000000, &a), FEGPU_ERR_OUT_OF_MEMORY,
           FEGPU_ERR_OUT_OF_DEVICE_MEMORY, "array", "a 10^6 x 10^6 f64 array");
    check(a == 0, "no handle written for the refused array");
    expect(fegpu_array_create_empty(ctx, FEGPU_DTYPE_F64, INT64_C(1) << 62, 4, &a), FEGPU_ERR_INVALID_ARGUMENT, 0,
           "overflow", "2^62 x 4 elements");
    still_usable(ctx);
}

static void huge_lattice(void) {
    fegpu_context_t ctx = context();
    fegpu_lattice_t lat = 0;
    expect(fegpu_lattice_create(ctx, 1200, 1200, 1200, FEGPU_DTYPE_F64, 0.8, 0, &lat), FEGPU_ERR_OUT_OF_MEMORY,
           FEGPU_ERR_OUT_OF_DEVICE_MEMORY, "lattice", "a 1200^3 f64 lattice");
    expect(fegpu_lattice_create(ctx, INT64_C(1) << 40, INT64_C(1) << 40, 4, FEGPU_DTYPE_F32, 0.8, 0, &lat),
           FEGPU_ERR_UNSUPPORTED, 0, "2^31 sites", "a lattice whose site count overflows");
    expect(fegpu_lattice_create(ctx, 8, 8, 8, FEGPU_DTYPE_F32, 0.8, 0, &lat), FEGPU_OK, 0, NULL, "a small lattice after");
    still_usable(ctx);
}

static void huge_radfields(void) {
    fegpu_context_t ctx = context();
    double points[6] = {0, 0, 0, 1, 1, 1}, k[2] = {6, 0}, om[2] = {6, 0};
    fegpu_radfields_t acc = 0;
    /* the caller claims 10^11 points: the fields cannot be held, and nothing
     * is read past the six doubles that exist */
    expect(fegpu_radfields_create(ctx, INT64_C(100000000000), points, 1, k, om, &acc), FEGPU_ERR_OUT_OF_MEMORY,
           FEGPU_ERR_OUT_OF_DEVICE_MEMORY, "rad_fields", "rad_fields with 10^11 S points");
    expect(fegpu_radfields_create(ctx, INT64_C(1) << 62, points, 1, k, om, &acc), FEGPU_ERR_INVALID_ARGUMENT, 0,
           "n_s", "rad_fields whose point array overflows");
    expect(fegpu_radfields_create(ctx, 2, points, 1, k, om, &acc), FEGPU_OK, 0, NULL, "rad_fields of two points after");
    still_usable(ctx);
}

/* ---- Matrix Market files that lie about their sizes ---- */

static void write_file(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        check(0, "write a test file");
        return;
    }
    fwrite(text, 1, n, f);
    fclose(f);
}

static void matrix_market(void) {
    static const struct {
        const char *name, *text, *word;
        fegpu_status want;
    } cases[] = {
        {"rows_1e12.mtx", "%%MatrixMarket matrix coordinate real general\n1000000000000 1000000000000 3\n1 1 1\n",
         "rows_1e12.mtx:2: rows = 1000000000000", FEGPU_ERR_UNSUPPORTED},
        {"nnz_1e12.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 1000000000000\n1 1 1\n",
         "nnz_1e12.mtx:2: declares 1000000000000 entries", FEGPU_ERR_INVALID_ARGUMENT},
        {"rows_2_31.mtx", "%%MatrixMarket matrix coordinate real general\n2147483649 2147483649 1\n1 1 1\n",
         "rows = 2147483649", FEGPU_ERR_UNSUPPORTED},
        {"zeros.mtx", "%%MatrixMarket matrix coordinate real general\n0 0 0\n", "zeros.mtx:2: rows = 0",
         FEGPU_ERR_INVALID_ARGUMENT},
        {"rows_1e19.mtx", "%%MatrixMarket matrix coordinate real general\n10000000000000000000 10 1\n1 1 1\n",
         "rows = 10000000000000000000", FEGPU_ERR_UNSUPPORTED},
        {"rows_5e7.mtx", "%%MatrixMarket matrix coordinate real general\n50000000 50000000 3\n1 1 1\n",
         "rows_5e7.mtx:3: file ends before its 3 entries", FEGPU_ERR_INVALID_ARGUMENT},
        {"nan.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 NaN\n2 2 1\n",
         "nan.mtx:3: value \"NaN\" is not a finite double", FEGPU_ERR_INVALID_ARGUMENT},
        {"big.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1e400\n",
         "big.mtx:4: value \"1e400\" is not a finite double", FEGPU_ERR_INVALID_ARGUMENT},
        {"empty.mtx", "", "empty.mtx:1: empty file", FEGPU_ERR_INVALID_ARGUMENT},
    };
    fegpu_context_t ctx = context();
    mkdir("hardening-data", 0755);
    char path[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(path, sizeof path, "hardening-data/%s", cases[i].name);
        write_file(path, cases[i].text, strlen(cases[i].text));
        fegpu_csr_t a = 0;
        expect(fegpu_csr_read_mm(ctx, path, &a), cases[i].want, 0, cases[i].word, cases[i].name);
        check(a == 0, "no handle written for a refused file");
    }
    /* a directory and a binary file are named as what they are */
    mkdir("hardening-data/dir.mtx", 0755);
    fegpu_csr_t a = 0;
    expect(fegpu_csr_read_mm(ctx, "hardening-data/dir.mtx", &a), FEGPU_ERR_INVALID_ARGUMENT, 0, "is a directory", "a directory");
    char binary[300];
    for (int i = 0; i < 300; i++) binary[i] = (char)(i * 37 + 128);
    write_file("hardening-data/binary.mtx", binary, sizeof binary);
    expect(fegpu_csr_read_mm(ctx, "hardening-data/binary.mtx", &a), FEGPU_ERR_INVALID_ARGUMENT, 0, "not a text file", "a binary file");
    const char *good = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 4\n2 2 5\n";
    write_file("hardening-data/good.mtx", good, strlen(good));
    expect(fegpu_csr_read_mm(ctx, "hardening-data/good.mtx", &a), FEGPU_OK, 0, NULL, "a good file after");
    still_usable(ctx);
}

/* ---- answers: a system whose norms underflow is solved, not declared solved ---- */

/* tridiag(-1, 2, -1) * s, n x n, 0-based CSR */
static void tridiag(int64_t n, double s, int64_t *rp, int64_t *ci, double *v) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        rp[i] = k;
        if (i > 0) ci[k] = i - 1, v[k++] = -s;
        ci[k] = i, v[k++] = 2 * s;
        if (i < n - 1) ci[k] = i + 1, v[k++] = -s;
    }
    rp[n] = k;
}

static void scaled_systems(void) {
    enum { N = 60 };
    int64_t rp[N + 1], ci[3 * N];
    double v[3 * N], b[N], x[N];
    const double scales[] = {1e-170, 1e-300, 1e170, 1e300};
    const int32_t methods[][2] = {{FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI}, {FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0},
                                  {FEGPU_METHOD_CG, FEGPU_PRECOND_NONE}};
    fegpu_context_t ctx = context();
    for (int s = 0; s < 4; s++) {
        tridiag(N, scales[s], rp, ci, v);
        for (int i = 0; i < N; i++) b[i] = (i == 0 || i == N - 1) ? scales[s] : 0.0; /* b = A 1 */
        fegpu_csr_t a = 0;
        expect(fegpu_csr_create_i64(ctx, N, N, rp[N], rp, ci, v, 0, &a), FEGPU_OK, 0, NULL, "scaled matrix");
        for (int m = 0; m < 3; m++) {
            fegpu_solver_t sol = 0;
            fegpu_array_t db = 0, dx = 0;
            for (int i = 0; i < N; i++) x[i] = 0;
            fegpu_array_create_f64(ctx, N, 1, b, &db);
            fegpu_array_create_f64(ctx, N, 1, x, &dx);
            fegpu_solver_create(a, methods[m][0], methods[m][1], &sol);
            struct fegpu_solve_info info;
            fegpu_status st = fegpu_solver_solve(sol, db, dx, 1e-10, 1000, &info);
            fegpu_array_download_f64(dx, x, N);
            double err = 0;
            for (int i = 0; i < N; i++) err = fmax(err, fabs(x[i] - 1));
            char what[160];
            snprintf(what, sizeof what, "A = %g tridiag, method %d precond %d: x = 1 to 1e-6 (error %.2e, %lld its, true residual %.2e)",
                     scales[s], methods[m][0], methods[m][1], err, (long long)info.iterations, info.true_relative_residual);
            printf("    %s\n", what);
            check(st == FEGPU_OK && err < 1e-6 && info.true_relative_residual <= 1e-10 && info.iterations > 0, what);
        }
    }
    /* ||x|| of vectors whose squares underflow or overflow */
    const double tiny[3] = {3e-200, 4e-200, 0}, huge[3] = {3e200, -4e200, 1e180};
    for (int t = 0; t < 2; t++) {
        const double *v = t ? huge : tiny;
        double want = t ? sqrt(25 + 1e-40) * 1e200 : 5e-200, got = 0;
        fegpu_array_t dv = 0;
        fegpu_array_create_f64(ctx, 3, 1, v, &dv);
        expect(fegpu_vector_nrm2(dv, &got), FEGPU_OK, 0, NULL, "nrm2");
        char what[96];
        snprintf(what, sizeof what, "nrm2 = %.17g, want %.17g", got, want);
        check(fabs(got - want) <= 1e-15 * want, what);
    }
    /* b = 0 exactly still gives x = 0 at once */
    fegpu_csr_t a = 0;
    tridiag(N, 1.0, rp, ci, v);
    fegpu_csr_create_i64(ctx, N, N, rp[N], rp, ci, v, 0, &a);
    fegpu_solver_t sol = 0;
    fegpu_solver_create(a, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, &sol);
    fegpu_array_t db = 0, dx = 0;
    for (int i = 0; i < N; i++) b[i] = 0, x[i] = 3;
    fegpu_array_create_f64(ctx, N, 1, b, &db);
    fegpu_array_create_f64(ctx, N, 1, x, &dx);
    struct fegpu_solve_info info;
    expect(fegpu_solver_solve(sol, db, dx, 1e-10, 100, &info), FEGPU_OK, 0, NULL, "b = 0");
    fegpu_array_download_f64(dx, x, N);
    check(x[0] == 0 && x[N - 1] == 0 && info.iterations == 0, "b = 0 gives x = 0 with no iteration");
    /* NaN in b and Inf in x are named as such, before any iteration, and x is unchanged */
    b[7] = NAN;
    fegpu_array_upload_f64(db, b, N);
    for (int i = 0; i < N; i++) x[i] = 0.5;
    fegpu_array_upload_f64(dx, x, N);
    expect(fegpu_solver_solve(sol, db, dx, 1e-10, 100, &info), FEGPU_ERR_INVALID_ARGUMENT, 0, "b[7] = NaN", "NaN in b");
    b[7] = 1;
    fegpu_array_upload_f64(db, b, N);
    x[3] = INFINITY;
    fegpu_array_upload_f64(dx, x, N);
    expect(fegpu_solver_solve(sol, db, dx, 1e-10, 100, &info), FEGPU_ERR_INVALID_ARGUMENT, 0, "x[3] = inf", "Inf in x");
    double back[N];
    fegpu_array_download_f64(dx, back, N);
    check(isinf(back[3]) && back[0] == 0.5, "x unchanged by the refused solve");
    x[3] = 0;
    fegpu_array_upload_f64(dx, x, N);
    expect(fegpu_solver_solve(sol, db, dx, 1e-10, 500, &info), FEGPU_OK, 0, NULL, "the same solver after");
    /* an ILU(0) pivot that overflows is named as an overflow, not a zero */
    int64_t rp2[3] = {0, 2, 4}, ci2[4] = {0, 1, 0, 1};
    double v2[4] = {1e-300, 1e300, 1e300, 1};
    fegpu_csr_t a2 = 0;
    fegpu_solver_t s2 = 0;
    fegpu_csr_create_i64(ctx, 2, 2, 4, rp2, ci2, v2, 0, &a2);
    expect(fegpu_solver_create(a2, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, &s2), FEGPU_ERR_BREAKDOWN, 0,
           "the pivot overflowed to -inf", "ILU(0) pivot overflow (the factorisation runs at creation)");
    check(s2 == 0, "no solver handle for the failed factorisation");
    still_usable(ctx);
}

/* ---- aliasing: the same device array twice, overlapping host arrays ---- */

/* a 2 x 1 strip of unit quad4 heat elements (6 nodes), 0-based */
static fegpu_fem_t heat_strip(fegpu_context_t ctx, int64_t extra_nodes) {
    double coords[2 * 8] = {0, 0, 1, 0, 2, 0, 0, 1, 1, 1, 2, 1, 5, 5, 6, 6};
    int64_t conn[8] = {0, 1, 4, 3, 1, 2, 5, 4}, material[2] = {0, 0};
    double props[2] = {1.0, 0.0};
    fegpu_fem_t fem = 0;
    expect(fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, 6 + extra_nodes, coords, 2, conn, 0, 1, props,
                            material, 2, &fem), FEGPU_OK, 0, NULL, "a heat strip");
    double rho_c[1] = {1.0};
    fegpu_fem_set_density(fem, 1, rho_c);
    fegpu_fem_integrate(fem);
    fegpu_csr_t k = 0;
    fegpu_fem_assemble(fem, &k);
    return fem;
}

static void aliasing(void) {
    fegpu_context_t ctx = context();
    fegpu_fem_t fem = heat_strip(ctx, 0);
    fegpu_heat_t heat = 0;
    /* NULL with a count of 0 is an empty list, as the header says */
    expect(fegpu_fem_heat_create(fem, 0.1, 1.0, 0, NULL, 1, NULL, &heat), FEGPU_OK, 0, NULL, "no fixed nodes, NULL lists");
    expect(fegpu_fem_heat_set_convection(heat, 0, NULL, 1, NULL, NULL), FEGPU_OK, 0, NULL, "no convection, NULL lists");
    double t[6] = {1, 2, 3, 4, 5, 6}, f[6] = {0}, back[6];
    fegpu_array_t dt = 0, df = 0;
    fegpu_array_create_f64(ctx, 6, 1, t, &dt);
    fegpu_array_create_f64(ctx, 6, 1, f, &df);
    struct fegpu_solve_info info;
    /* the load and the temperature the same array: refused, not a deadlock */
    expect(fegpu_fem_heat_step(heat, dt, dt, 1e-10, 100, &info), FEGPU_ERR_INVALID_ARGUMENT, 0, "same array", "heat step with F = T");
    fegpu_array_download_f64(dt, back, 6);
    check(memcmp(back, t, sizeof t) == 0, "T unchanged by the refused step");
    expect(fegpu_fem_heat_step(heat, dt, df, 1e-10, 100, &info), FEGPU_OK, 0, NULL, "the stepper after");
    /* a mesh node no element uses is named as such */
    fegpu_fem_t loose = heat_strip(ctx, 2);
    expect(fegpu_fem_heat_create(loose, 0.1, 1.0, 0, NULL, 1, NULL, &heat), FEGPU_ERR_INVALID_ARGUMENT, 0,
           "node 7 (1-based; 6 0-based) belongs to no element", "an unused mesh node");
    /* device arrays: the same handle twice where the call writes one of them */
    fegpu_array_t a = 0;
    double m[6] = {1, 2, 3, 4, 5, 6};
    fegpu_array_create_f64(ctx, 6, 1, m, &a);
    expect(fegpu_vector_axpby(1.0, a, 2.0, a), FEGPU_ERR_INVALID_ARGUMENT, 0, "same array", "axpby with x = y");
    expect(fegpu_dense_copy(a, a, 0), FEGPU_ERR_INVALID_ARGUMENT, 0, "same array", "copy onto itself");
    /* host arrays: an output that overlaps an input */
    double h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, before[8];
    memcpy(before, h, sizeof h);
    expect(fegpu_pipeline_gemm(ctx, 2, 2, 2, 1.0, h, h + 4, 0.0, h, 0, 0, 0), FEGPU_ERR_INVALID_ARGUMENT, 0, "c and a overlap",
           "pipeline gemm with C = A");
    expect(fegpu_pipeline_transpose(ctx, 2, 2, h, h, 0, 0, 0), FEGPU_ERR_INVALID_ARGUMENT, 0, "at and a overlap",
           "pipeline transpose in place");
    expect(fegpu_dense_transpose_host_f64(ctx, 2, 2, h, h + 1, 0), FEGPU_ERR_INVALID_ARGUMENT, 0, "at and a overlap",
           "host transpose into an overlapping array");
    check(memcmp(h, before, sizeof h) == 0, "the host arrays unchanged by the refused calls");
    double c[4];
    expect(fegpu_pipeline_gemm(ctx, 2, 2, 2, 1.0, h, h + 4, 0.0, c, 0, 0, 0), FEGPU_OK, 0, NULL, "gemm into its own array");
    check(c[0] == 1 * 5 + 3 * 6 && c[3] == 2 * 7 + 4 * 8, "gemm's numbers");
    still_usable(ctx);
}

/* ---- handles and counts that are named for what they are ---- */

static void names(void) {
    fegpu_context_t ctx = context();
    fegpu_array_t forged = (UINT64_C(2) << 56) | UINT64_C(0xffffffffff);
    expect(fegpu_array_destroy(forged), FEGPU_ERR_INVALID_HANDLE, 0, "never created", "a forged handle");
    double coords[8] = {0, 0, 1, 0, 1, 1, 0, 1}, props[2] = {1, 0};
    int64_t conn[4] = {0, 1, 2, 3}, material[1] = {0};
    fegpu_fem_t fem = 0;
    expect(fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, 4, coords, INT64_C(1) << 62, conn, 0, 1, props,
                            material, 2, &fem), FEGPU_ERR_INVALID_ARGUMENT, 0, "n_elements", "n_elements whose conn overflows");
    still_usable(ctx);
}

/* ---- the child-process harness ---- */

static int run(const char *name, void (*body)(void)) {
    printf("%s\n", name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(300); /* a hang ends as SIGALRM, reported below */
        body();
        fflush(stdout);
        _exit(failed);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        printf("    FAIL: %s died of signal %d (%s)\n", name, WTERMSIG(status), WTERMSIG(status) == SIGALRM ? "a hang" : "an abort or crash");
        return 1;
    }
    return WEXITSTATUS(status) != 0;
}

int main(void) {
    static const struct {
        const char *name;
        void (*body)(void);
    } cases[] = {
        {"sizes: a huge array", huge_array},
        {"sizes: a huge lattice", huge_lattice},
        {"sizes: rad_fields with 10^11 points", huge_radfields},
        {"Matrix Market files that lie", matrix_market},
        {"answers: scaled systems, b = 0, non-finite b and x, ILU overflow", scaled_systems},
        {"aliasing and empty lists", aliasing},
        {"names of handles and counts", names},
    };
    int n = sizeof cases / sizeof cases[0], bad = 0;
    for (int i = 0; i < n; i++) bad += run(cases[i].name, cases[i].body);
    printf("%d passed, %d failed\n", n - bad, bad);
    return bad != 0;
}
