/* The checks the distributed C drivers share: each rank counts its failed
 * expectations and prints them with fegpu's last message; the job passes
 * when no rank failed. */
#ifndef DIST_CHECKS_H
#define DIST_CHECKS_H
#include "fegpu_mpi.h"
#include <stdio.h>

static int rank, size, failures;

static const char *last_error(void) {
    static char buf[1024];
    fegpu_last_error_message(buf, sizeof buf);
    return buf;
}

static void expect(int ok, const char *what) {
    if (!ok) {
        failures++;
        fprintf(stderr, "rank %d: FAILED: %s (%s)\n", rank, what, last_error());
    }
}

/* MPI started, this rank's number and the job's size set, and the rank's
 * context created (on the GPU of its node-local rank). */
static fegpu_context_t start(int *argc, char ***argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fegpu_context_t ctx = 0;
    expect(fegpu_dist_context_create(fegpu_comm(MPI_COMM_WORLD), FEGPU_BACKEND_AUTO, -1, &ctx) == FEGPU_OK, "context");
    return ctx;
}

/* The failures of every rank, summed, with the verdict printed on rank 0. Collective. */
static int failures_everywhere(const char *program) {
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s on %d ranks: %s\n", program, size, total ? "FAILED" : "all checks passed");
    return total;
}
#endif
