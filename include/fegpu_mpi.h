/*
 * fegpu's distributed API for C programs that use MPI: include this instead
 * of fegpu.h (it needs an fegpu built with FEGPU_MPI=ON).
 *
 * fegpu's functions take the communicator as its Fortran handle, so the
 * library's ABI is the same whatever MPI's MPI_Comm is; fegpu_comm converts:
 *
 *   fegpu_dist_csr_create_i32(ctx, fegpu_comm(MPI_COMM_WORLD), n_global,
 *                             first_row, nrows, row_ptr, col_ind, values, 0, &a);
 *
 * Every fegpu_dist_* call is collective over that communicator.
 */
#ifndef FEGPU_MPI_H
#define FEGPU_MPI_H
#include <mpi.h>
#ifndef FEGPU_MPI
#define FEGPU_MPI 1
#endif
#include "fegpu.h"

static inline int32_t fegpu_comm(MPI_Comm comm) { return (int32_t)MPI_Comm_c2f(comm); }

#endif /* FEGPU_MPI_H */
