/* Element-by-element CG over the ranks, as a multi-GPU FEM code runs it
 * (FEStudio's CG: the mesh partitioned by elements, the interface nodes
 * summed by neighbour exchange), against the one-process EBE CG of the
 * same global system, which every rank also solves alone: a clamped
 * two-material hex8 block (E ratio 100) under a body force, its top face
 * pushed down. The elements go to the ranks in a scattered pattern (many
 * interfaces, a node shared by up to four ranks); each rank numbers its
 * own nodes in its own order (descending global number) and assembles its
 * own loads. The top face's condition is given by one holder of each node
 * only (the union is the distributed solver's). Stored and on-the-fly
 * element matrices. The iterations equal the one-process ones within
 * rounding's reach (2%, at least 1) and the displacements agree to 1e-8 of
 * their size at every local node, ghosts included.
 * Refused on every rank: a node numbered twice on one rank, two values for
 * one shared dof, n_nodes not the set's, a load vector of the wrong size on
 * one rank, a tolerance that differs between ranks; a good solve follows,
 * after element matrices integrated again on one rank only.
 * Runs under mpiexec -n 1..4 on whatever backend FEGPU_BACKEND selects. */
#include "dist_checks.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EX 6
#define EY 5
#define EZ 7
#define NXN (EX + 1)
#define NYN (EY + 1)
#define NZN (EZ + 1)
#define NODES (NXN * NYN * NZN)
#define ELEMS (EX * EY * EZ)

static int part(int e) {
    int ex = e % EX, ey = e / EX % EY, ez = e / (EX * EY);
    return (ex / 2 + ey / 3 + ez) % size;
}

static int64_t node_of(int i, int j, int k) { return i + NXN * (j + NYN * (int64_t)k); }

static void element_nodes(int e, int64_t n[8]) {
    int ex = e % EX, ey = e / EX % EY, ez = e / (EX * EY);
    for (int c = 0; c < 8; c++) {
        int dx = (c == 1 || c == 2 || c == 5 || c == 6), dy = (c == 2 || c == 3 || c == 6 || c == 7), dz = c >= 4;
        n[c] = node_of(ex + dx, ey + dy, ez + dz);
    }
}

static void coords_of(int64_t g, double xyz[3]) {
    int i = (int)(g % NXN), j = (int)(g / NXN % NYN), k = (int)(g / (NXN * NYN));
    xyz[0] = i + 0.08 * sin(1.3 * j + 0.7 * k);
    xyz[1] = 0.9 * j + 0.06 * cos(0.9 * i + k);
    xyz[2] = 1.1 * k + 0.05 * sin(i + 2.1 * j);
}

/* The system on the elements `mine` (a rank's, or all) over nodes `gnode`
 * (local numbering): coordinates, connectivity, materials, body force. */
typedef struct {
    int64_t n_nodes, n_el, *gnode, *conn, *material;
    double *coords, *force;
} mesh;

static unsigned holders[NODES]; /* bit r: rank r holds the node */

static mesh build(int only) {
    mesh m = {0};
    int64_t *local = malloc(NODES * sizeof(int64_t));
    for (int64_t g = NODES - 1; g >= 0; g--)
        local[g] = (only < 0 || holders[g] >> only & 1) ? m.n_nodes++ : -1;
    m.gnode = malloc(m.n_nodes * sizeof(int64_t));
    m.coords = malloc(3 * m.n_nodes * sizeof(double));
    for (int64_t g = 0; g < NODES; g++)
        if (local[g] >= 0) m.gnode[local[g]] = g, coords_of(g, m.coords + 3 * local[g]);
    for (int e = 0; e < ELEMS; e++) m.n_el += only < 0 || part(e) == only;
    m.conn = malloc(8 * m.n_el * sizeof(int64_t));
    m.material = malloc(m.n_el * sizeof(int64_t));
    m.force = malloc(3 * m.n_el * sizeof(double));
    int64_t at = 0;
    for (int e = 0; e < ELEMS; e++) {
        if (only >= 0 && part(e) != only) continue;
        int64_t n[8];
        element_nodes(e, n);
        for (int c = 0; c < 8; c++) m.conn[8 * at + c] = local[n[c]];
        int ez = e / (EX * EY);
        m.material[at] = ez < 3;
        m.force[3 * at] = 0.1, m.force[3 * at + 1] = -0.05 * (e % 3), m.force[3 * at + 2] = -1.0 - 0.01 * e;
        at++;
    }
    free(local);
    return m;
}

static void drop(mesh *m) { free(m->gnode), free(m->conn), free(m->material), free(m->coords), free(m->force); }

/* The conditions a rank gives (the one-process solve: all of them): the
 * bottom clamped by every holder, the top's z by the highest holder only. */
static int64_t conditions(const mesh *m, int who, double top, int64_t *dofs, double *values) {
    int64_t nf = 0;
    for (int64_t l = 0; l < m->n_nodes; l++) {
        int64_t g = m->gnode[l];
        int k = (int)(g / (NXN * NYN));
        int highest = 31 - __builtin_clz(holders[g]);
        if (k == 0)
            for (int c = 0; c < 3; c++) dofs[nf] = 3 * l + c, values[nf++] = 0.0;
        if (k == NZN - 1 && (who < 0 || who == highest)) dofs[nf] = 3 * l + 2, values[nf++] = top;
    }
    return nf;
}

typedef struct {
    fegpu_fem_t fem;
    fegpu_array_t b, x;
} system_t;

static system_t assemble(fegpu_context_t ctx, const mesh *m) {
    system_t s = {0};
    const double props[4] = {1.0, 0.3, 100.0, 0.25};
    expect(fegpu_fem_create(ctx, FEGPU_ELEMENT_HEX8, FEGPU_PROBLEM_ELASTIC_3D, m->n_nodes, m->coords, m->n_el, m->conn, 0, 2,
                            props, m->material, 2, &s.fem) == FEGPU_OK,
           "element set");
    expect(fegpu_fem_integrate(s.fem) == FEGPU_OK, "integrate");
    double *zero = calloc(3 * m->n_nodes, sizeof(double)), *guess = malloc(3 * m->n_nodes * sizeof(double));
    for (int64_t d = 0; d < 3 * m->n_nodes; d++) guess[d] = 1e-3 * sin(0.37 * (3 * m->gnode[d / 3] + d % 3));
    expect(fegpu_array_create_f64(ctx, 3 * m->n_nodes, 1, zero, &s.b) == FEGPU_OK, "b");
    expect(fegpu_array_create_f64(ctx, 3 * m->n_nodes, 1, guess, &s.x) == FEGPU_OK, "x");
    expect(fegpu_fem_body_load(s.fem, 3 * m->n_el, m->force, s.b) == FEGPU_OK, "body load");
    free(zero), free(guess);
    return s;
}

static void release(system_t *s) { fegpu_array_destroy(s->b), fegpu_array_destroy(s->x), fegpu_fem_destroy(s->fem); }

int main(int argc, char **argv) {
    fegpu_context_t ctx = start(&argc, &argv);
    for (int e = 0; e < ELEMS; e++) {
        int64_t n[8];
        element_nodes(e, n);
        for (int c = 0; c < 8; c++) holders[n[c]] |= 1u << part(e);
    }
    mesh whole = build(-1), mine = build(rank);
    int64_t *dofs = malloc(3 * NODES * sizeof(int64_t));
    double *values = malloc(3 * NODES * sizeof(double));
    const double tol = 1e-10;

    for (int otf = 0; otf <= 1; otf++) {
        /* the one-process solve of the whole system */
        system_t ref = assemble(ctx, &whole);
        fegpu_ebe_t one = 0;
        int64_t nf = conditions(&whole, -1, -0.01, dofs, values);
        expect(fegpu_fem_ebe_create(ref.fem, nf, dofs, 0, values, otf, &one) == FEGPU_OK, "one-process solver");
        fegpu_solve_info ri = {0};
        expect(fegpu_fem_ebe_solve(one, ref.b, ref.x, tol, 5000, &ri) == FEGPU_OK, "one-process solve");
        double *xr = malloc(3 * NODES * sizeof(double));
        fegpu_array_download_f64(ref.x, xr, 3 * NODES);

        /* this rank's part of the distributed solve */
        system_t s = assemble(ctx, &mine);
        fegpu_ebe_t ebe = 0;
        nf = conditions(&mine, rank, -0.01, dofs, values);
        expect(fegpu_dist_ebe_create(s.fem, fegpu_comm(MPI_COMM_WORLD), mine.n_nodes, mine.gnode, 0, nf, dofs, values, otf, &ebe) ==
                   FEGPU_OK,
               "distributed solver");
        char text[512];
        expect(fegpu_dist_ebe_describe(ebe, text, sizeof text, NULL) == FEGPU_OK && strstr(text, "ranks"), "describe");
        if (rank == 0 && otf == 0) printf("%s\n", text);
        fegpu_solve_info di = {0};
        expect(fegpu_fem_ebe_solve(ebe, s.b, s.x, tol, 5000, &di) == FEGPU_OK, "distributed solve");
        double *x = malloc(3 * mine.n_nodes * sizeof(double)), scale = 0, err = 0;
        fegpu_array_download_f64(s.x, x, 3 * mine.n_nodes);
        for (int64_t d = 0; d < 3 * NODES; d++) scale = fmax(scale, fabs(xr[d]));
        /* the whole mesh is numbered in descending global order as well */
        for (int64_t d = 0; d < 3 * mine.n_nodes; d++)
            err = fmax(err, fabs(x[d] - xr[3 * (NODES - 1 - mine.gnode[d / 3]) + d % 3]));
        int64_t slack = ri.iterations / 50 > 1 ? ri.iterations / 50 : 1;
        if (rank == 0)
            printf("%s: one process %lld iterations, %d ranks %lld; max |x - x_one| / max |x_one| = %.2e; true residual %.2e\n",
                   otf ? "on the fly" : "stored", (long long)ri.iterations, size, (long long)di.iterations, err / scale,
                   di.true_relative_residual);
        expect(llabs(di.iterations - ri.iterations) <= slack, "iterations as the one-process solve's");
        expect(err <= 1e-8 * scale && scale > 1e-3, "displacements as the one-process solve's");
        expect(di.true_relative_residual <= 10 * tol, "true residual");
        if (otf == 0) {
            /* refusals on every rank; the solver still works after them */
            fegpu_array_t small = 0;
            fegpu_array_create_empty(ctx, FEGPU_DTYPE_F64, 3 * mine.n_nodes - (rank == size - 1), 1, &small);
            expect(fegpu_fem_ebe_solve(ebe, rank == size - 1 ? small : s.b, s.x, tol, 5000, NULL) == FEGPU_ERR_SIZE_MISMATCH,
                   "b of the wrong size on the last rank refused on every rank");
            fegpu_array_destroy(small);
            if (size > 1)
                expect(fegpu_fem_ebe_solve(ebe, s.b, s.x, rank == 0 ? tol : 2 * tol, 5000, NULL) == FEGPU_ERR_INVALID_ARGUMENT,
                       "tol differing between ranks refused on every rank");
            /* new element matrices on one rank only: every rank rebuilds the diagonal with it */
            if (rank == size - 1) expect(fegpu_fem_integrate(s.fem) == FEGPU_OK, "integrate again on the last rank");
            fegpu_solve_info again = {0};
            expect(fegpu_fem_ebe_solve(ebe, s.b, s.x, tol, 5000, &again) == FEGPU_OK && again.true_relative_residual <= 10 * tol,
                   "solve after refusals");
        }
        fegpu_fem_ebe_destroy(ebe), fegpu_fem_ebe_destroy(one);
        free(x), free(xr);
        release(&s), release(&ref);
    }

    /* refused on every rank, nothing created */
    system_t s = assemble(ctx, &mine);
    fegpu_ebe_t bad = 0;
    int64_t nf = conditions(&mine, rank, -0.01, dofs, values);
    int64_t keep = mine.gnode[0];
    if (rank == size - 1) mine.gnode[0] = mine.gnode[1];
    expect(fegpu_dist_ebe_create(s.fem, fegpu_comm(MPI_COMM_WORLD), mine.n_nodes, mine.gnode, 0, nf, dofs, values, 0, &bad) ==
                   FEGPU_ERR_INVALID_ARGUMENT && bad == 0,
           "a node numbered twice on the last rank refused on every rank");
    mine.gnode[0] = keep;
    expect(fegpu_dist_ebe_create(s.fem, fegpu_comm(MPI_COMM_WORLD), mine.n_nodes - (rank == 0), mine.gnode, 0, nf, dofs, values, 0,
                                 &bad) == FEGPU_ERR_SIZE_MISMATCH && bad == 0,
           "n_nodes not the set's on rank 0 refused on every rank");
    /* every holder of a top node gives its own value for it: shared top nodes conflict */
    int shared_top = 0;
    for (int64_t g = NODES - NXN * NYN; g < NODES; g++) shared_top |= (holders[g] & (holders[g] - 1)) != 0;
    nf = 0;
    for (int64_t l = 0; l < mine.n_nodes; l++) {
        if (mine.gnode[l] < NXN * NYN) for (int c = 0; c < 3; c++) dofs[nf] = 3 * l + c, values[nf++] = 0.0;
        if (mine.gnode[l] >= NODES - NXN * NYN) dofs[nf] = 3 * l + 2, values[nf++] = -0.01 - 0.001 * rank;
    }
    int st = fegpu_dist_ebe_create(s.fem, fegpu_comm(MPI_COMM_WORLD), mine.n_nodes, mine.gnode, 0, nf, dofs, values, 0, &bad);
    if (shared_top) {
        expect(st == FEGPU_ERR_INVALID_ARGUMENT && bad == 0 && strstr(last_error(), "one value"),
               "two values for a shared dof refused on every rank");
    } else {
        expect(st == FEGPU_OK, "no shared top node: the conditions are accepted");
        fegpu_fem_ebe_destroy(bad);
    }
    release(&s);
    drop(&whole), drop(&mine);
    free(dofs), free(values);
    fegpu_context_destroy(ctx);
    int total = failures_everywhere("dist_ebe");
    MPI_Finalize();
    return total != 0;
}
