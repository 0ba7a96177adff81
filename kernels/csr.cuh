// The CSR row product the SpMV-like kernels share (prepended, after
// kernels/common.cuh, to sparse.cu and amg.cu).

// The sum of a group of TPR lanes, in its first lane.
template <int TPR>
__device__ __forceinline__ double group_sum(double sum) {
#pragma unroll
    for (int off = TPR / 2; off > 0; off >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, off, TPR);
    return sum;
}

// Row `row` of A times x by the TPR lanes of its group, summed into lane 0.
// Every lane of the warp must call it (the shuffles); rows past n give 0.
// The values V are double, or float where only they are single (the AMG
// cycle's f32 matrices): the products and sums stay double.
template <int TPR, typename V>
__device__ double row_times(i64 row, int n, int lane, const int* __restrict__ rp, const int* __restrict__ ci,
                            const V* __restrict__ v, const double* __restrict__ x) {
    double sum = 0.0;
    if (row < n) {
        const int e = rp[row + 1];
        for (int k = rp[row] + lane; k < e; k += TPR) sum += (double)v[k] * __ldg(&x[ci[k]]);
    }
    return group_sum<TPR>(sum);
}
