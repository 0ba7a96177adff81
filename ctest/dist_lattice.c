/* A D3Q19 lattice split over the ranks in z-slabs, as an MPI lattice-
 * Boltzmann code splits its grid, against the one-process lattice of the
 * same global setup (every rank also runs that one, alone): a channel with
 * a velocity inlet and a pressure outlet on every plane, side walls, a
 * sphere crossing the slabs, either periodic in z with TRT and a body force
 * or closed in z under a moving lid. Through steps, populations set in the
 * middle of the run and new boundary values, each rank's populations and
 * fields equal the one-process ones bit for bit on the CPU backend (to
 * 1e-12 on CUDA, where the one-process lattice streams in place and the
 * split one by pull), and the force on the sphere and lid equals the
 * one-process force to rounding (summed in another order). The slabs are
 * uneven (rank r gets r + 1 shares). A gap, an overlap, a rank with no
 * plane, a tau that differs between ranks and flags of the wrong size on
 * one rank are refused on every rank.
 * Runs under mpiexec -n 1..4 on whatever backend FEGPU_BACKEND selects. */
#include "dist_checks.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 12
#define NY 9
#define NZ 14
#define PLANE (NX * NY)
#define Q 19

/* This rank's planes: r + 1 shares of NZ, each rank at least one. */
static void my_slab(int64_t *first, int64_t *count) {
    double total = size * (size + 1) / 2.0, acc = 0;
    int64_t start = 0;
    for (int r = 0; r <= rank; r++) {
        acc += r + 1;
        int64_t end = r == size - 1 ? NZ : (int64_t)llround(NZ * acc / total);
        if (end <= start) end = start + 1;
        *first = start, *count = end - start;
        start = end;
    }
}

static int in_sphere(int x, int y, int z) {
    double dx = x - 5.5, dy = y - 4.0, dz = z - NZ / 2.0 + 0.5;
    return dx * dx + dy * dy + dz * dz <= 2.6 * 2.6;
}

/* Flags, body mask and open-boundary values of planes z0..z0+nz-1. */
static void setup(fegpu_lattice_t lat, int64_t z0, int64_t nz, int lid, double inflow) {
    int64_t n = PLANE * nz, m = 0;
    uint8_t *flags = malloc(n), *body = malloc(n);
    double *values = malloc(4 * n * sizeof(double));
    for (int64_t s = 0; s < n; s++) {
        int x = (int)(s % NX), y = (int)(s / NX % NY), z = (int)(z0 + s / PLANE);
        uint8_t f = FEGPU_FLUID;
        if (in_sphere(x, y, z)) f = FEGPU_WALL;
        if (lid && z == NZ - 1) f = FEGPU_MOVING_WALL;
        if (x == 0 && f == FEGPU_FLUID) f = FEGPU_VELOCITY_BC;
        if (x == NX - 1 && f == FEGPU_FLUID) f = FEGPU_PRESSURE_BC;
        flags[s] = f;
        body[s] = f == FEGPU_WALL || f == FEGPU_MOVING_WALL;
        if (f == FEGPU_VELOCITY_BC || f == FEGPU_PRESSURE_BC) {
            double *v = values + 4 * m++;
            v[0] = 1.0 - 0.0007 * z, v[1] = inflow * (1 + 0.1 * sin(z + 0.3 * y)), v[2] = 0.002 * cos(z), v[3] = 0.0;
        }
    }
    expect(fegpu_lattice_set_flags(lat, flags, n) == FEGPU_OK, "flags");
    expect(fegpu_lattice_set_boundary_values(lat, values, 4 * m) == FEGPU_OK, "boundary values");
    expect(fegpu_lattice_set_body(lat, body, n) == FEGPU_OK, "body");
    free(flags), free(body), free(values);
}

/* The whole run on a lattice holding planes z0..z0+nz-1 (all of them, or a slab). */
static void run(fegpu_lattice_t lat, int64_t z0, int64_t nz, int lid) {
    setup(lat, z0, nz, lid, 0.03);
    if (lid) {
        expect(fegpu_lattice_set_wall_velocity(lat, 0.05, 0.01, 0.0) == FEGPU_OK, "wall velocity");
    } else {
        expect(fegpu_lattice_set_trt(lat, 3.0 / 16.0) == FEGPU_OK, "TRT");
        expect(fegpu_lattice_set_force(lat, 1e-5, 0.0, 2e-6) == FEGPU_OK, "force");
    }
    expect(fegpu_lattice_init_equilibrium(lat, 1.0, 0.01, 0.0, 0.002) == FEGPU_OK, "equilibrium");
    expect(fegpu_lattice_step(lat, 7) == FEGPU_OK, "steps");
    /* populations perturbed by site (global numbering) and set back */
    int64_t n = PLANE * nz;
    double *f = malloc(Q * n * sizeof(double));
    expect(fegpu_lattice_get_populations(lat, f, Q * n) == FEGPU_OK, "get populations");
    for (int64_t k = 0; k < Q * n; k++) f[k] *= 1.0 + 1e-3 * sin(0.7 * (double)(k + Q * PLANE * z0));
    expect(fegpu_lattice_set_populations(lat, f, Q * n) == FEGPU_OK, "set populations");
    expect(fegpu_lattice_step(lat, 13) == FEGPU_OK, "steps after new populations");
    setup(lat, z0, nz, lid, 0.045);
    expect(fegpu_lattice_step(lat, 11) == FEGPU_OK, "steps after new boundary values");
    free(f);
}

static double differ(const double *a, const double *b, int64_t n) {
    double worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs(a[k] - b[k]);
        if (d > worst || d != d) worst = d != d ? INFINITY : d;
    }
    return worst;
}

static void bad_slabs(fegpu_context_t ctx, int64_t first, int64_t count) {
    fegpu_lattice_t lat = 0;
    int32_t comm = fegpu_comm(MPI_COMM_WORLD);
    /* rank 0 starts one plane late (a gap, or with one rank the planes fall short) */
    int st = fegpu_dist_lattice_create(ctx, comm, NX, NY, NZ, rank == 0 ? 2 : first + 1, count, FEGPU_DTYPE_F64, 0.8, 0, &lat);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && lat == 0, "a gap refused on every rank");
    expect(strstr(last_error(), "plane") != NULL, "the message names the planes");
    /* the last rank reaches one plane too far (an overlap, or beyond nz) */
    st = fegpu_dist_lattice_create(ctx, comm, NX, NY, NZ, first + 1, rank == size - 1 ? count + 1 : count, FEGPU_DTYPE_F64, 0.8, 0,
                                   &lat);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && lat == 0, "planes beyond nz refused on every rank");
    /* a rank with no plane */
    st = fegpu_dist_lattice_create(ctx, comm, NX, NY, NZ, first + 1, rank == 0 ? 0 : count, FEGPU_DTYPE_F64, 0.8, 0, &lat);
    expect(st == FEGPU_ERR_INVALID_ARGUMENT && lat == 0, "a rank with no plane refused on every rank");
    if (size > 1) {
        st = fegpu_dist_lattice_create(ctx, comm, NX, NY, NZ, first + 1, count, FEGPU_DTYPE_F64, rank == 1 ? 0.9 : 0.8, 0, &lat);
        expect(st == FEGPU_ERR_INVALID_ARGUMENT && lat == 0, "a tau that differs between ranks refused on every rank");
        expect(strstr(last_error(), "rank 1") != NULL, "the message names the rank that differs");
    }
    /* flags of the wrong size on the last rank: every rank refuses, every lattice keeps its flags */
    expect(fegpu_dist_lattice_create(ctx, comm, NX, NY, NZ, first + 1, count, FEGPU_DTYPE_F64, 0.8, 0, &lat) == FEGPU_OK,
           "a good split lattice");
    uint8_t *flags = calloc(PLANE * count + 1, 1);
    st = fegpu_lattice_set_flags(lat, flags, rank == size - 1 ? PLANE * count + 1 : PLANE * count);
    expect(st == FEGPU_ERR_SIZE_MISMATCH, "flags of the wrong size on one rank refused on every rank");
    if (rank != size - 1) expect(strncmp(last_error(), "rank ", 5) == 0, "the other ranks are told which rank failed");
    expect(fegpu_lattice_step(lat, 2) == FEGPU_OK, "the lattice still steps");
    free(flags);
    fegpu_lattice_destroy(lat);
}

int main(int argc, char **argv) {
    fegpu_context_t ctx = start(&argc, &argv);
    int32_t backend = 0;
    fegpu_context_backend(ctx, &backend);
    /* the two schemes on CUDA round differently; on the CPU the step is one code */
    double tol = backend == FEGPU_BACKEND_CPU ? 0.0 : 1e-12;
    int64_t z0, nz;
    my_slab(&z0, &nz);
    bad_slabs(ctx, z0, nz);
    int64_t n = PLANE * nz;
    double *f = malloc(Q * n * 8), *rho = malloc(n * 8), *u = malloc(3 * n * 8);
    double *f_all = malloc(Q * PLANE * NZ * 8), *rho_all = malloc(PLANE * NZ * 8), *u_all = malloc(3 * PLANE * NZ * 8);
    for (int lid = 0; lid <= 1; lid++) {
        int periodic = lid ? 0 : FEGPU_PERIODIC_Z;
        fegpu_lattice_t whole = 0, part = 0;
        expect(fegpu_lattice_create(ctx, NX, NY, NZ, FEGPU_DTYPE_F64, 0.8, periodic, &whole) == FEGPU_OK, "one-process lattice");
        expect(fegpu_dist_lattice_create(ctx, fegpu_comm(MPI_COMM_WORLD), NX, NY, NZ, z0 + 1, nz, FEGPU_DTYPE_F64, 0.8, periodic,
                                         &part) == FEGPU_OK,
               "split lattice");
        run(whole, 0, NZ, lid);
        run(part, z0, nz, lid);
        expect(fegpu_lattice_get_populations(part, f, Q * n) == FEGPU_OK, "split populations");
        expect(fegpu_lattice_get_populations(whole, f_all, Q * PLANE * NZ) == FEGPU_OK, "one-process populations");
        expect(fegpu_lattice_fields(part, z0 + 1, nz, rho, u) == FEGPU_OK, "split fields");
        expect(fegpu_lattice_fields(whole, z0 + 1, nz, rho_all, u_all) == FEGPU_OK, "one-process fields");
        double df = differ(f, f_all + Q * PLANE * z0, Q * n), dr = differ(rho, rho_all, n), du = differ(u, u_all, 3 * n);
        if (df > tol || dr > tol || du > tol)
            fprintf(stderr, "rank %d (%s): populations differ by %g, density %g, velocity %g\n", rank, lid ? "lid" : "periodic", df,
                    dr, du);
        expect(df <= tol && dr <= tol && du <= tol, "each rank's planes equal the one-process lattice's");
        double force[3], force_all[3];
        expect(fegpu_lattice_body_force(part, force) == FEGPU_OK, "split body force");
        expect(fegpu_lattice_body_force(whole, force_all) == FEGPU_OK, "one-process body force");
        for (int a = 0; a < 3; a++)
            expect(fabs(force[a] - force_all[a]) <= 1e-12 * (fabs(force_all[0]) + fabs(force_all[1]) + fabs(force_all[2])),
                   "the body force equals the one-process force to rounding");
        /* a read outside this rank's planes is refused, on this rank alone */
        int outside = z0 > 0 ? (int)z0 : (int)(z0 + nz + 1);
        if (z0 + nz < NZ || z0 > 0)
            expect(fegpu_lattice_fields(part, outside, 1, rho, u) == FEGPU_ERR_INVALID_ARGUMENT, "a plane of another rank refused");
        if (rank == 0) {
            char text[512];
            fegpu_dist_lattice_describe(part, text, sizeof text, NULL);
            printf("%s: force (%.6e, %.6e, %.6e) split, (%.6e, %.6e, %.6e) in one process; %s\n", lid ? "closed, lid" : "periodic z",
                   force[0], force[1], force[2], force_all[0], force_all[1], force_all[2], text);
        }
        fegpu_lattice_destroy(part), fegpu_lattice_destroy(whole);
    }
    int total = failures_everywhere("dist_lattice");
    free(f), free(rho), free(u), free(f_all), free(rho_all), free(u_all);
    fegpu_context_destroy(ctx);
    MPI_Finalize();
    return total ? 1 : 0;
}
