// Distributed runs (src/dist): the halo exchange's packing on the device.

// out[i] = x[rows[i]]: the owned x values a neighbouring rank needs, packed
// into one buffer (runs per neighbour) for a single download before MPI.
extern "C" __global__ void dist_gather(i64 n, const double* __restrict__ x, const int* __restrict__ rows,
                                       double* __restrict__ out) {
    GRID_STRIDE(i, n) out[i] = x[rows[i]];
}
