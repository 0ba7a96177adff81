/* rad_fields over the ranks as a replicated-data FE-IIEE code would call it:
 * every rank holds all the S points and every batch of S' sources; fegpu
 * splits the S points over the ranks (uneven: 203 points), each rank
 * accumulates its slice, and the download gives every rank the fields of
 * all points. Against the one-process accumulator of the same points and
 * batches (each rank also runs that one, alone): the same fields, bit for
 * bit on the CPU backend (to 1e-12 on CUDA) and the same count of skipped
 * coincident pairs, through a reset and a second iteration. A n_rhs that
 * differs between ranks, a point that is not finite and a download of the
 * wrong size on one rank are refused on every rank.
 * Runs under mpiexec -n 1..4 on whatever backend FEGPU_BACKEND selects. */
#include "dist_checks.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS 203
#define NRHS 3

/* Point i of n on a sphere of radius r (golden-angle spiral, turned by `turn`). */
static void sphere_point(int i, int n, double r, double turn, double *p) {
    double z = 1.0 - (2.0 * i + 1.0) / n, rho = sqrt(1.0 - z * z), phi = 2.399963229728653 * i + turn;
    p[0] = r * rho * cos(phi), p[1] = r * rho * sin(phi), p[2] = r * z;
}

/* Batch b of n_p S' points: a sphere of radius 1.5, its first two points on S points (coincident pairs). */
static void batch(int b, int n_p, const double *s, double *p, double *w, double *cur) {
    for (int i = 0; i < n_p; i++) {
        sphere_point(i, n_p, 1.5, 0.7 * b, p + 3 * i);
        w[i] = 0.01 * (1 + 0.3 * sin(i + b));
    }
    memcpy(p, s + 3 * (5 + b), 3 * sizeof(double));
    memcpy(p + 3, s + 3 * (NS - 1 - b), 3 * sizeof(double));
    for (int k = 0; k < 12 * n_p * NRHS; k++) cur[k] = sin(0.37 * k + b) * (k % 5 == 0 ? 2.0 : 1.0);
}

static double differ(const double *a, const double *b, int n) {
    double worst = 0, scale = 0;
    for (int k = 0; k < n; k++) {
        double d = fabs(a[k] - b[k]);
        worst = d != d ? INFINITY : (d > worst ? d : worst);
        scale = fabs(b[k]) > scale ? fabs(b[k]) : scale;
    }
    return worst / (scale > 0 ? scale : 1);
}

int main(int argc, char **argv) {
    fegpu_context_t ctx = start(&argc, &argv);
    int32_t comm = fegpu_comm(MPI_COMM_WORLD);
    int32_t backend = 0;
    fegpu_context_backend(ctx, &backend);
    double tol = backend == FEGPU_BACKEND_CPU ? 0.0 : 1e-12;
    double s[3 * NS], k[2] = {6.283185307179586, 0.05}, omega_mu[2] = {2.1, 0.0};
    for (int i = 0; i < NS; i++) sphere_point(i, NS, 0.5 + 0.4 * (i % 7) / 7.0, 0.0, s + 3 * i);
    int n_fields = 6 * NS * NRHS;
    double *split_fields = malloc(2 * n_fields * sizeof(double)), *whole_fields = malloc(2 * n_fields * sizeof(double));
    double p[3 * 80], w[80], *cur = malloc(12 * 80 * NRHS * sizeof(double));

    fegpu_radfields_t split = 0, whole = 0;
    expect(fegpu_dist_radfields_create(ctx, comm, NS, s, NRHS, k, omega_mu, &split) == FEGPU_OK, "split accumulator");
    expect(fegpu_radfields_create(ctx, NS, s, NRHS, k, omega_mu, &whole) == FEGPU_OK, "one-process accumulator");
    for (int iteration = 0; iteration < 2; iteration++) {
        if (iteration == 1) {
            expect(fegpu_radfields_reset(split) == FEGPU_OK && fegpu_radfields_reset(whole) == FEGPU_OK, "reset");
        }
        for (int b = 0; b < 2; b++) {
            int n_p = b == 0 ? 80 : 47;
            batch(b + 2 * iteration, n_p, s, p, w, cur);
            expect(fegpu_radfields_accumulate(split, n_p, p, w, cur) == FEGPU_OK, "split accumulate");
            expect(fegpu_radfields_accumulate(whole, n_p, p, w, cur) == FEGPU_OK, "one-process accumulate");
        }
        memset(split_fields, 0xff, 2 * n_fields * sizeof(double)); /* NaN: every element must be written */
        expect(fegpu_radfields_download(split, split_fields, n_fields) == FEGPU_OK, "split download");
        expect(fegpu_radfields_download(whole, whole_fields, n_fields) == FEGPU_OK, "one-process download");
        double d = differ(split_fields, whole_fields, 2 * n_fields);
        if (d > tol) fprintf(stderr, "rank %d: iteration %d: fields differ by %g (relative)\n", rank, iteration, d);
        expect(d <= tol, "every rank's fields equal the one-process fields");
        int64_t ex_split = -1, ex_whole = -2;
        expect(fegpu_radfields_excluded(split, &ex_split) == FEGPU_OK, "split excluded");
        expect(fegpu_radfields_excluded(whole, &ex_whole) == FEGPU_OK, "one-process excluded");
        expect(ex_split == ex_whole && ex_whole == 4, "the coincident pairs skipped, counted over the ranks");
    }
    /* a download of the wrong size on the last rank: refused on every rank */
    int st = fegpu_radfields_download(split, split_fields, rank == size - 1 ? n_fields - 1 : n_fields);
    expect(st == FEGPU_ERR_SIZE_MISMATCH, "a download of the wrong size on one rank refused on every rank");
    if (rank != size - 1) expect(strncmp(last_error(), "rank ", 5) == 0, "the other ranks are told which rank");
    if (rank == 0) {
        char text[512];
        fegpu_dist_radfields_describe(split, text, sizeof text, NULL);
        printf("%s\n", text);
    }
    fegpu_radfields_destroy(split), fegpu_radfields_destroy(whole);

    /* n_rhs differing between ranks, and a point that is not finite */
    fegpu_radfields_t bad = 0;
    if (size > 1) {
        st = fegpu_dist_radfields_create(ctx, comm, NS, s, rank == 1 ? NRHS + 1 : NRHS, k, omega_mu, &bad);
        expect(st == FEGPU_ERR_INVALID_ARGUMENT && bad == 0, "n_rhs differing between ranks refused on every rank");
    }
    s[3 * 150 + 1] = NAN;
    st = fegpu_dist_radfields_create(ctx, comm, NS, s, NRHS, k, omega_mu, &bad);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && bad == 0 && strstr(last_error(), "points[451]") != NULL,
           "a point that is not finite named by its global number");

    int total = failures_everywhere("dist_radfields");
    free(split_fields), free(whole_fields), free(cur);
    fegpu_context_destroy(ctx);
    MPI_Finalize();
    return total ? 1 : 0;
}
