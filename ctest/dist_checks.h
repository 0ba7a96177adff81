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

/* The failures of every rank, summed, with the verdict printed on rank 0. Collective. */
static int failures_everywhere(const char *program) {
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s on %d ranks: %s\n", program, size, total ? "FAILED" : "all checks passed");
    return total;
}
#endif
